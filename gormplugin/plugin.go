package idplugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/internal/idgen"
)

// pluginName is the name the plugin registers under in gorm.Config.Plugins.
const pluginName = "gorm:idforge"

// callbackName is the create callback the plugin registers.
const callbackName = "idforge:fill_ids"

// Settings configures the plugin. The zero value draws from
// idforge.Default() and fills tagged fields and the ID of an embedded
// gorm.Model.
type Settings struct {
	// Registry is where generators come from: one from idforge.New, or any
	// other engine.Provider. Tags name its kinds and names:
	// `idgen:"chain,name=order"` asks for kind "chain", name "order". The
	// default is idforge.Default(), the process-wide registry: kind
	// "snowflake" on the machine ID of IDFORGE_MACHINE_ID, a StatefulSet
	// ordinal, else the lowest free on this host, safe on a single host only.
	Registry engine.Provider
	// UntaggedPrimaryKeys also fills models whose primary key carries no
	// idgen tag: a single 64-bit integer key (int64, uint64, int,
	// engine.ID) not marked autoIncrement gets an ID from DefaultGenerator,
	// and GORM's auto-increment is turned off for it. Keys of other types
	// are left alone.
	UntaggedPrimaryKeys bool
	// DefaultGenerator is the generator of untagged keys, written as an
	// idgen tag: "chain,name=order" (default "snowflake"). Setting it
	// implies UntaggedPrimaryKeys. The keys it fills are 64-bit integers,
	// so a format ("snowflake,format=hex") or the kind "uuidv7" is refused
	// with engine.ErrInvalidConfig when the plugin is initialised; tag
	// string and UUID keys instead.
	DefaultGenerator string
	// GormModelAutoIncrement leaves the ID of an embedded gorm.Model to the
	// database's auto-increment, as without the plugin. By default the
	// plugin fills it from DefaultGenerator, since gorm.Model's ID cannot
	// carry a tag.
	GormModelAutoIncrement bool
	// Logger is where the plugin says, at Info level, which fields of a
	// model it fills when it first sees the model, and warns of keys in
	// auto-incrementing columns (default: the *gorm.DB's logger).
	Logger logger.Interface
}

// config is Settings resolved by Initialize.
type config struct {
	registry engine.Provider
	logger   logger.Interface
	cols     *gormids.Columns // which columns it fills; registered on the db for shardgorm
}

// plugin fills ID fields on create; it is safe for concurrent use. It
// keeps what it learns of each model (the fields it fills and their
// generators) on itself.
type plugin struct {
	set []Settings
	cfg config

	plans      sync.Map   // *schema.Schema -> planResult
	byType     sync.Map   // reflect.Type -> *modelPlan, for Fill of structs
	floors     sync.Map   // floorKey -> true: floors given to the registry
	autoWarned sync.Map   // autoKey -> true: auto-increment columns warned about
	binary     sync.Map   // *schema.Field -> true: UUID columns that take 16 bytes
	mu         sync.Mutex // serializes first sight: planning mutates GORM's cached schema

	roots      sync.Map       // rootKey -> the *gorm.DB registered on, whose pool inspect reads on
	inspecting sync.WaitGroup // inspections running in the background
}

type planResult struct {
	plan *modelPlan
	err  error
}

// New returns the plugin, configured by at most one Settings (none: the
// defaults), to register with db.Use, which validates them; it fills ID
// fields on create and is safe for concurrent use.
func New(s ...Settings) gorm.Plugin { return &plugin{set: s} }

// Name implements gorm.Plugin: "gorm:idforge".
func (p *plugin) Name() string { return pluginName }

// resolve validates the settings given to New into the plugin's config.
func (p *plugin) resolve() error {
	var s Settings
	switch len(p.set) {
	case 0:
	case 1:
		s = p.set[0]
	default:
		return fmt.Errorf("%w: idplugin.New: %d Settings given; it takes at most one", engine.ErrInvalidConfig, len(p.set))
	}
	if v := reflect.ValueOf(s.Registry); s.Registry != nil && v.Kind() == reflect.Pointer && v.IsNil() {
		// A nil registry of some type is a registry that was never built:
		// falling back to the default one would issue IDs on machine 0.
		return fmt.Errorf("%w: idplugin.Settings.Registry: a nil %T (leave it unset for the default registry)", engine.ErrInvalidConfig, s.Registry)
	}
	cols := &gormids.Columns{Registry: s.Registry, Untagged: s.UntaggedPrimaryKeys, Default: idgen.Spec{Kind: "snowflake"},
		ModelAuto: s.GormModelAutoIncrement}
	if s.DefaultGenerator != "" {
		def, err := idgen.ParseTag(s.DefaultGenerator)
		if err != nil {
			return fmt.Errorf("idplugin.Settings.DefaultGenerator: %w", err)
		}
		if err := checkDefault(def); err != nil {
			return err
		}
		cols.Untagged, cols.Default = true, def
	}
	if cols.Registry == nil {
		reg, err := idforge.Default()
		if err != nil {
			return fmt.Errorf("idplugin: the default registry: %w", err)
		}
		cols.Registry = reg
	}
	p.cfg = config{registry: cols.Registry, logger: s.Logger, cols: cols}
	return nil
}

// checkDefault refuses a DefaultGenerator the plugin cannot give to the
// keys it fills with it, untagged 64-bit integers: a format or a UUID kind
// would not fit them, and such a key used to be left to the database's
// auto-increment without a word.
func checkDefault(def idgen.Spec) error {
	why := ""
	switch {
	case def.Kind == idgen.KindUUIDv7:
		why = fmt.Sprintf("kind %q fills UUID fields", def.Kind)
	case def.Format != "":
		why = fmt.Sprintf("format=%s is for string fields", def.Format)
	default:
		if _, err := idgen.NewField("untagged key", "ID", reflect.TypeFor[int64](), def); err != nil {
			why = err.Error()
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: idplugin.Settings.DefaultGenerator %q: it fills untagged 64-bit integer keys, and %s; "+
		"name an integer generator (\"snowflake\", \"chain,name=order\"), and tag string or UUID keys instead",
		engine.ErrInvalidConfig, def, why)
}

// Initialize implements gorm.Plugin: it registers the create callbacks: one
// that learns a model on first sight, before GORM's transaction begins; the
// one that fills IDs ahead of GORM's BeforeCreate hooks and of gorm:create,
// one after gorm:create that reads back the keys of rows an upsert met,
// before the associations saved after the row take its key, and one after
// the AfterCreate hooks.
func (p *plugin) Initialize(db *gorm.DB) error {
	if err := p.resolve(); err != nil {
		return err
	}
	p.roots.LoadOrStore(rootKey(db), db)
	if err := db.Use(p.cfg.cols); err != nil {
		return err
	}
	create := db.Callback().Create()
	return errors.Join(
		create.Before("gorm:begin_transaction").Register(learnCallbackName, p.learn),
		create.Before("gorm:before_create").Register(callbackName, p.create),
		create.After("gorm:create").Before("gorm:save_after_associations").Register(upsertCallbackName, p.upserted),
		create.After("gorm:after_create").Register(endCallbackName, p.end),
	)
}

// endCallbackName is the create callback that runs after the AfterCreate hooks.
const endCallbackName = "idforge:end_create"

func (p *plugin) create(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil {
		return
	}
	ctx := ctxOf(db)
	plan, err := p.plan(ctx, db, stmt.Schema, false)
	if err != nil || plan.filler.Len() == 0 {
		db.AddError(err) // a model without idgen fields: GORM's own behaviour, untouched
		return
	}
	var up *upsert
	if _, ok := stmt.Clauses["ON CONFLICT"]; ok {
		if err := plan.refuseUpsert(stmt); err != nil {
			db.AddError(err)
			return
		}
		up = plan.beginUpsert(ctx, stmt) // before the fill: which values it draws
	}
	if err := plan.fill(ctx, stmt.Dest, stmt.ReflectValue); err != nil {
		db.AddError(err)
		return
	}
	if err := plan.includeKeys(stmt); err != nil {
		db.AddError(err)
		return
	}
	if _, nested := ctx.Value(inflightKey{}).(*inflight); nested {
		if err := plan.checkCopies(ctx, stmt); err != nil {
			db.AddError(err)
			return
		}
	}
	if up != nil {
		up.prepare()
		stmt.Settings.Store(upsertKey{}, up)
	}
	if plan.hooks && !stmt.SkipHooks {
		plan.enterHooks(stmt)
	}
}

// fill fills dest, whose rows are of the plan's schema; rv is dest with
// pointers followed, as GORM's Statement.ReflectValue.
func (mp *modelPlan) fill(ctx context.Context, dest any, rv reflect.Value) error {
	ms, ok := mapsOf(dest)
	if !ok {
		return gormids.InvalidData(mp.filler.Fill(ctx, rv))
	}
	for _, m := range ms {
		if err := mp.fillMap(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// mapsOf returns the maps of a create of maps, as GORM takes them.
func mapsOf(dest any) ([]map[string]any, bool) {
	switch m := dest.(type) {
	case map[string]any:
		return []map[string]any{m}, true
	case *map[string]any:
		return []map[string]any{*m}, true
	case []map[string]any:
		return m, true
	case *[]map[string]any:
		return *m, true
	}
	return nil, false
}

// mapKey is the key under which m holds sf: its column name, or its field
// name when m uses that, as GORM reads maps.
func mapKey(m map[string]any, sf *schema.Field) string {
	if _, ok := m[sf.DBName]; !ok {
		if _, ok := m[sf.Name]; ok {
			return sf.Name
		}
	}
	return sf.DBName
}

// fillMap fills a tagged column the map names with a zero value, and adds one
// it leaves out under its column name.
func (mp *modelPlan) fillMap(ctx context.Context, m map[string]any) error {
	if m == nil {
		return gormids.InvalidData(fmt.Errorf("%w: model %s: nil map", idgen.ErrInvalidData, mp.schema.Name))
	}
	for i, sf := range mp.fields {
		if sf.DBName == "" {
			continue // not a column: nothing to insert
		}
		key := mapKey(m, sf)
		if cur, ok := m[key]; ok && !isZero(cur) {
			continue
		}
		v := reflect.New(sf.FieldType).Elem()
		if err := mp.filler.FillField(ctx, i, v); err != nil {
			return err
		}
		m[key] = v.Interface()
		if mp.binary[i] {
			m[key] = toBinary(m[key])
		}
	}
	return nil
}

func isZero(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	return rv.IsZero()
}

func (p *plugin) logger(db *gorm.DB) logger.Interface {
	if p.cfg.logger != nil {
		return p.cfg.logger
	}
	return db.Logger
}

// Fill fills the tagged (and, with WithUntaggedPrimaryKeys, key) fields of
// value exactly as Create would, without inserting anything: value is a
// pointer to a struct, a slice or array of structs or of pointers, or, with a
// model set by db.Model, a map or slice of maps. Associations are left to the
// Create that inserts them. The IDs are drawn with db's context. Fill needs
// the plugin registered on db.
//
// Use it to know a row's ID before choosing where to insert it, as shard
// routing does.
func Fill(db *gorm.DB, value any) error {
	p, err := pluginOf(db)
	if err != nil {
		return err
	}
	ctx, rv := ctxOf(db), reflect.ValueOf(value)
	model := db.Statement.Model
	// Structs and slices of them need no GORM statement: their plan is
	// found by type, so filling one row costs no allocation.
	var rowType reflect.Type
	if model == nil && db.Statement.Table == "" {
		rowType, _ = idgen.RowType(rv)
		if mp, ok := p.byType.Load(rowType); ok && rowType != nil {
			return mp.(*modelPlan).fill(ctx, value, rv)
		}
	}
	if model == nil {
		model = value
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return err
	}
	plan, err := p.plan(ctx, db, stmt.Schema, false)
	if err != nil || plan.filler.Len() == 0 {
		return err
	}
	if rowType == plan.filler.Type() {
		p.byType.Store(rowType, plan)
	}
	return plan.fill(ctx, value, rv)
}

// Prepare checks models (and the models of their associations) the way the
// first Create would, reporting every tag, type and generator error at once,
// turns GORM's implied auto-increment off for the primary keys the plugin
// fills, and sets the SQL types of the columns that hold UUIDs (a native
// uuid on PostgreSQL; BINARY(16) for uuid.UUID, CHAR(36) for strings on
// MariaDB/MySQL; TEXT on SQLite; also for the foreign keys that reference a
// UUID key) and the length of dated strings. Call it before db.AutoMigrate
// and the first Create, so that AutoMigrate creates those columns so (plain
// BIGINT for integer keys) and creates write to them accordingly; a model
// Prepare did not see first keeps GORM's types unless its gorm tag names
// one. For a table named with db.Table(name), prepare on that same
// db.Table(name) (which prepares the model's own schema too, the one
// Create uses). It needs the plugin registered on db.
func Prepare(db *gorm.DB, models ...any) error {
	p, err := pluginOf(db)
	if err != nil {
		return err
	}
	ctx := ctxOf(db)
	seen := map[*schema.Schema]bool{}
	var errs []error
	var walk func(s *schema.Schema)
	walk = func(s *schema.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		if _, err := p.plan(ctx, db, s, true); err != nil {
			errs = append(errs, err)
		}
		for _, rel := range s.Relationships.Relations {
			walk(rel.FieldSchema)
		}
	}
	for _, m := range models {
		// AutoMigrate under db.Table(name) works on a schema cached for that
		// table name, Create on the model's own: prepare both.
		for _, table := range slices.Compact([]string{db.Statement.Table, ""}) {
			stmt := &gorm.Statement{DB: db}
			if err := stmt.ParseWithSpecialTableName(m, table); err != nil {
				errs = append(errs, err)
				break
			}
			walk(stmt.Schema)
		}
	}
	return errors.Join(errs...)
}

func pluginOf(db *gorm.DB) (*plugin, error) {
	if p, ok := db.Config.Plugins[pluginName].(*plugin); ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w: the idforge plugin is not registered on this *gorm.DB (db.Use(idplugin.New(...)))", engine.ErrInvalidConfig)
}

func ctxOf(db *gorm.DB) context.Context {
	if db.Statement.Context != nil {
		return db.Statement.Context
	}
	return context.Background()
}
