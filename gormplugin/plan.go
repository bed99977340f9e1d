package idplugin

import (
	"context"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/internal/idgen"
)

// modelPlan is what the plugin fills in one schema's rows.
type modelPlan struct {
	schema *schema.Schema
	filler *idgen.Filler
	// fields are GORM's fields of the filler's targets, in the same order,
	// and ids the targets' fields.
	fields []*schema.Field
	ids    []*idgen.Field
	// cols are the indexes of the fields that are columns.
	cols []int
	// key is the index of the primary key among fields, when the model has
	// a single-column key the plugin fills; -1 otherwise.
	key int
	// hooks: the model has create or save hooks, which may create copies.
	hooks bool
	// binary: the field's UUID goes to the database as 16 bytes.
	binary []bool
}

// plan returns the cached plan of s, building it on first sight, and then,
// when prepare (Prepare sees s first), setting the SQL types of its UUID and
// dated columns. Errors in tags and field types are cached and returned
// every time; a registry that cannot produce a generator yet (unknown kind,
// store down) is asked again next time.
func (p *plugin) plan(ctx context.Context, db *gorm.DB, s *schema.Schema, prepare bool) (*modelPlan, error) {
	if r, ok := p.plans.Load(s); ok {
		res := r.(planResult)
		return res.plan, res.err
	}
	mp, implied, err := p.build(ctx, db, s, prepare)
	// Outside the lock: it reads the table, and may wait for a connection.
	p.warnAutoIncrement(ctx, db, s, implied)
	return mp, err
}

// build builds and caches the plan of s, once, and returns it with the
// keys whose auto-increment GORM implied and the plugin turned off, when
// it built it.
func (p *plugin) build(ctx context.Context, db *gorm.DB, s *schema.Schema, prepare bool) (*modelPlan, []*schema.Field, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.plans.Load(s); ok {
		res := r.(planResult)
		return res.plan, nil, res.err
	}
	targets, fields, err := p.cfg.cols.Targets(s)
	if err != nil {
		p.plans.Store(s, planResult{err: err})
		return nil, nil, err
	}
	// Before Bind: binding builds the chains, whose first fetch asks the
	// floors.
	for i, t := range targets {
		p.addFloor(db, s.Table, fields[i].DBName, t.Field)
	}
	filler, err := idgen.Bind(ctx, p.cfg.registry, s.ModelType, targets)
	if err != nil {
		return nil, nil, err
	}
	mp := &modelPlan{schema: s, filler: filler, fields: fields, key: -1,
		hooks: s.BeforeCreate || s.AfterCreate || s.BeforeSave || s.AfterSave}
	var desc []string
	var implied []*schema.Field // keys GORM took for auto-increment
	for i, sf := range fields {
		mp.ids = append(mp.ids, targets[i].Field)
		if sf.DBName != "" {
			mp.cols = append(mp.cols, i)
		}
		if len(s.PrimaryFields) == 1 && sf == s.PrimaryFields[0] {
			mp.key = i
		}
		d := targets[i].Name + " <- " + targets[i].Spec.String()
		if turnOffAutoIncrement(s, sf) {
			d += " (auto-increment off)"
			implied = append(implied, sf)
		}
		desc = append(desc, d)
	}
	mp.binary = p.setColumnTypes(db, s, fields, mp.ids, prepare)
	if len(desc) > 0 {
		p.logger(db).Info(ctx, "idforge: model %s: %s", s.Name, strings.Join(desc, ", "))
	}
	p.plans.Store(s, planResult{plan: mp})
	return mp, implied, nil
}

// floorKey is one column of one table of one database that a sequence
// fills: its floor is added to the registry once.
type floorKey struct {
	db                    *gorm.Config
	table, column, series string
}

// addFloor gives the registry the floor of f's sequence in column of table:
// the largest ID stored there, 0 while the table does not exist. It reads
// on the pool of the *gorm.DB the plugin was registered on (see root), not
// in the session that first created a row of the model: it is asked again
// after every store reset, long after that session ended.
func (p *plugin) addFloor(db *gorm.DB, table, column string, f *idgen.Field) {
	if !idgen.Sequence(f.Spec.Kind) || table == "" || column == "" {
		return
	}
	root := p.root(db)
	name := f.FloorName()
	k := floorKey{root.Config, table, column, name}
	if _, seen := p.floors.LoadOrStore(k, true); seen {
		return
	}
	idgen.AddFloor(p.cfg.registry, name, gormids.Floor(root, table, idgen.Column{Field: f, Name: column}))
}

// turnOffAutoIncrement undoes the auto-increment GORM implies for an integer
// primary key the plugin fills, so inserts carry the ID (no RETURNING on
// PostgreSQL) and AutoMigrate creates a plain BIGINT. A field that asks for
// autoIncrement or a default in its tag keeps them. It reports whether it
// changed anything.
func turnOffAutoIncrement(s *schema.Schema, f *schema.Field) bool {
	if !f.AutoIncrement {
		return false
	}
	if _, ok := f.TagSettings["AUTOINCREMENT"]; ok {
		return false
	}
	f.AutoIncrement = false
	if _, ok := f.TagSettings["DEFAULT"]; ok {
		return true
	}
	f.HasDefaultValue = false
	// A new slice: a Create of another model may be reading the old one.
	kept := make([]*schema.Field, 0, len(s.FieldsWithDefaultDBValue))
	for _, d := range s.FieldsWithDefaultDBValue {
		if d != f {
			kept = append(kept, d)
		}
	}
	s.FieldsWithDefaultDBValue = kept
	return true
}
