package gormids

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
	"gorm.io/gorm/utils"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// Columns are the idforge GORM plugin's rules for which columns of a model
// it fills, and the registry it fills them from. The plugin (package
// idplugin) builds them from its Settings and registers them on every
// *gorm.DB it is used on, beside itself, so shardgorm reads the same rules
// through [Of].
type Columns struct {
	// Registry is what the IDs are drawn from.
	Registry engine.Provider
	// Untagged fills an untagged 64-bit integer primary key from Default.
	Untagged bool
	// Default is the generator of untagged keys and of gorm.Model's ID.
	Default idgen.Spec
	// ModelAuto leaves the ID of an embedded gorm.Model to the database.
	ModelAuto bool
}

// columnsName is the name the plugin registers its Columns under.
const columnsName = "gorm:idforge:columns"

// Name implements gorm.Plugin.
func (c *Columns) Name() string { return columnsName }

// Initialize implements gorm.Plugin; the rules register no callbacks.
func (c *Columns) Initialize(*gorm.DB) error { return nil }

// Of returns the Columns of the idforge plugin registered on db, an error
// wrapping engine.ErrInvalidConfig for a db without the plugin.
func Of(db *gorm.DB) (*Columns, error) {
	if c, ok := db.Config.Plugins[columnsName].(*Columns); ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w: the idforge plugin is not registered on this *gorm.DB (db.Use(idplugin.New(...)))", engine.ErrInvalidConfig)
}

// Sequences returns the columns of s the plugin fills from a sequence
// ("chain", "segment"), as its first Create of s would find them, or the
// error that Create would give for s's tags.
func (c *Columns) Sequences(s *schema.Schema) ([]idgen.Column, error) {
	targets, fields, err := c.Targets(s)
	if err != nil {
		return nil, err
	}
	var cols []idgen.Column
	for i, t := range targets {
		if idgen.Sequence(t.Spec.Kind) && fields[i].DBName != "" {
			cols = append(cols, idgen.Column{Field: t.Field, Name: fields[i].DBName})
		}
	}
	return cols, nil
}

// Targets lists the fields of s the plugin fills, with GORM's fields for
// them: the tagged ones, the ID of an embedded gorm.Model (unless
// ModelAuto), and with Untagged an untagged 64-bit integer primary key.
func (c *Columns) Targets(s *schema.Schema) ([]idgen.Target, []*schema.Field, error) {
	// Plain reflection also sees tags GORM skips, on unexported fields.
	if _, err := idgen.NewPlan(s.ModelType); err != nil {
		return nil, nil, err
	}
	var (
		targets []idgen.Target
		fields  []*schema.Field
	)
	add := func(sf *schema.Field, f *idgen.Field) {
		targets = append(targets, idgen.Target{Field: f, Index: indexPath(sf)})
		fields = append(fields, sf)
	}
	tagged := map[*schema.Field]bool{}
	for _, sf := range s.Fields {
		f, err := idgen.FromStructField(s.Name, strings.Join(sf.BindNames, "."), sf.StructField)
		if err != nil {
			return nil, nil, err
		}
		if f == nil {
			continue
		}
		if sf.DBName != "" && !sf.Creatable {
			return nil, nil, fmt.Errorf("%w: model %s field %s: GORM does not insert this column (read-only permission in its gorm tag), so the ID would never reach the row",
				engine.ErrInvalidConfig, s.Name, f.Name)
		}
		add(sf, f)
		tagged[sf] = true
	}
	if len(s.PrimaryFields) != 1 {
		return targets, fields, nil
	}
	pk := s.PrimaryFields[0]
	if tagged[pk] || explicitAutoIncrement(pk) {
		return targets, fields, nil
	}
	name := strings.Join(pk.BindNames, ".")
	switch {
	case !c.ModelAuto && inGormModel(s.ModelType, pk):
		f, err := idgen.NewField(s.Name, name, pk.FieldType, c.Default)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: model %s field %s: gorm.Model's ID is a uint, %d bits on this platform, too narrow for an ID: "+
				"replace gorm.Model by your own base with an int64 ID tagged `idgen:\"snowflake\"`, or leave the ID to the database with idplugin.Settings{GormModelAutoIncrement: true}",
				engine.ErrInvalidConfig, s.Name, name, strconv.IntSize)
		}
		add(pk, f)
	case c.Untagged && (pk.GORMDataType == schema.Int || pk.GORMDataType == schema.Uint):
		if f, err := idgen.NewField(s.Name, name, pk.FieldType, c.Default); err == nil {
			add(pk, f)
		} // else not 64 bits wide: left to the database
	}
	return targets, fields, nil
}

var gormModel = reflect.TypeFor[gorm.Model]()

// inGormModel reports whether f is a field of a gorm.Model embedded in t.
func inGormModel(t reflect.Type, f *schema.Field) bool {
	path := indexPath(f)
	if len(path) < 2 {
		return false
	}
	sf := t.FieldByIndex(path[:len(path)-1]) // the embedded struct holding f
	typ := sf.Type
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ == gormModel
}

// indexPath is the index of f from its model struct, as reflect writes it:
// GORM marks the steps through an embedded pointer negative.
func indexPath(f *schema.Field) []int {
	path := make([]int, len(f.StructField.Index))
	for i, x := range f.StructField.Index {
		if x < 0 {
			x = -x - 1
		}
		path[i] = x
	}
	return path
}

func explicitAutoIncrement(f *schema.Field) bool {
	v, ok := f.TagSettings["AUTOINCREMENT"]
	return ok && utils.CheckTruth(v)
}
