package idplugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"
	"gorm.io/gorm/utils"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// PluginName is the name the plugin registers under in gorm.Config.Plugins.
const PluginName = "idforge"

// callbackName is the create callback the plugin registers.
const callbackName = "idforge:fill_ids"

// Option configures the plugin.
type Option func(*config)

type config struct {
	registry *engine.Registry
	untagged bool
	def      idgen.Spec
	logger   logger.Interface
}

// WithRegistry sets the registry generators are drawn from. Tags name its
// kinds and names: `idgen:"chain,name=order"` asks for kind "chain", name
// "order".
func WithRegistry(r *engine.Registry) Option { return func(c *config) { c.registry = r } }

// WithUntaggedPrimaryKeys also fills models whose primary key carries no
// idgen tag: a single 64-bit integer key (int64, uint64, int, engine.ID) not
// marked autoIncrement gets an ID from the default generator (kind
// "snowflake", unless [WithDefaultGenerator] says otherwise), and GORM's
// auto-increment is turned off for it. Keys of other types are left alone.
func WithUntaggedPrimaryKeys() Option { return func(c *config) { c.untagged = true } }

// WithDefaultGenerator fills untagged primary keys from kind and name; it
// implies [WithUntaggedPrimaryKeys].
func WithDefaultGenerator(kind, name string) Option {
	return func(c *config) {
		c.untagged = true
		c.def = idgen.Spec{Kind: kind, Name: name}
	}
}

// WithLogger sets where the plugin says, at Info level, which fields of a
// model it fills when it first sees the model. The default is the *gorm.DB's
// logger.
func WithLogger(l logger.Interface) Option { return func(c *config) { c.logger = l } }

// Plugin fills ID fields on create. Make one with [New] and register it with
// db.Use; it is safe for concurrent use.
type Plugin struct {
	cfg config

	plans sync.Map   // *schema.Schema -> planResult
	mu    sync.Mutex // serializes first sight: planning mutates GORM's cached schema
}

type planResult struct {
	plan *modelPlan
	err  error
}

// modelPlan is what the plugin fills in one schema's rows.
type modelPlan struct {
	schema *schema.Schema
	fields []planField
}

type planField struct {
	sf  *schema.Field
	f   *idgen.Field
	gen engine.Generator // cached, so the hot path takes no registry lock
}

// New returns the plugin. Without [WithRegistry] it draws from
// idforge.Default(), the process-wide registry: kind "snowflake" on the
// machine ID of machine.Default() (IDFORGE_MACHINE_ID, a StatefulSet ordinal,
// else 0, which is safe for a single instance only).
func New(opts ...Option) *Plugin {
	p := &Plugin{cfg: config{def: idgen.Spec{Kind: "snowflake"}}}
	for _, o := range opts {
		o(&p.cfg)
	}
	return p
}

// Name implements gorm.Plugin.
func (p *Plugin) Name() string { return PluginName }

// Initialize implements gorm.Plugin: it registers the create callback, ahead
// of GORM's BeforeCreate hooks and of gorm:create.
func (p *Plugin) Initialize(db *gorm.DB) error {
	if p.cfg.registry == nil {
		reg, err := idforge.Default()
		if err != nil {
			return fmt.Errorf("idplugin: the default registry: %w", err)
		}
		p.cfg.registry = reg.Registry
	}
	if p.cfg.untagged && p.cfg.def.Kind == "" {
		return fmt.Errorf("%w: idplugin.WithDefaultGenerator needs a kind", engine.ErrInvalidConfig)
	}
	return db.Callback().Create().Before("gorm:before_create").Register(callbackName, p.create)
}

func (p *Plugin) create(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil {
		return
	}
	db.AddError(p.fill(stmt.Context, p.logger(db), stmt.Schema, stmt.Dest, stmt.ReflectValue))
}

// fill fills dest, whose rows are of schema s; rv is dest with pointers
// followed, as GORM's Statement.ReflectValue.
func (p *Plugin) fill(ctx context.Context, log logger.Interface, s *schema.Schema, dest any, rv reflect.Value) error {
	plan, err := p.plan(ctx, log, s)
	if err != nil || len(plan.fields) == 0 {
		return err
	}
	switch m := dest.(type) {
	case map[string]any:
		return plan.fillMap(ctx, m)
	case *map[string]any:
		return plan.fillMap(ctx, *m)
	case []map[string]any:
		return plan.fillMaps(ctx, m)
	case *[]map[string]any:
		return plan.fillMaps(ctx, *m)
	}
	if rv.Kind() == reflect.Struct {
		return plan.fillRow(ctx, rv) // no closure: single-row creates stay allocation-free
	}
	return idgen.Rows(rv, func(row reflect.Value) error { return plan.fillRow(ctx, row) })
}

func (mp *modelPlan) fillRow(ctx context.Context, row reflect.Value) error {
	if row.Type() != mp.schema.ModelType {
		return fmt.Errorf("%w: model %s: cannot fill IDs into a %s", engine.ErrInvalidConfig, mp.schema.Name, row.Type())
	}
	if !row.CanAddr() {
		return fmt.Errorf("%w: model %s: pass a pointer (or a slice) so IDs can be written back", engine.ErrInvalidConfig, mp.schema.Name)
	}
	for i := range mp.fields {
		pf := &mp.fields[i]
		// ReflectValueOf, not ValueOf/Set: those box the value, an allocation per row.
		if err := pf.f.Fill(ctx, pf.gen, pf.sf.ReflectValueOf(ctx, row)); err != nil {
			return err
		}
	}
	return nil
}

func (mp *modelPlan) fillMaps(ctx context.Context, ms []map[string]any) error {
	for _, m := range ms {
		if err := mp.fillMap(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// fillMap fills a tagged column the map names with a zero value, and adds one
// it leaves out under its column name.
func (mp *modelPlan) fillMap(ctx context.Context, m map[string]any) error {
	if m == nil {
		return fmt.Errorf("%w: model %s: nil map", engine.ErrInvalidConfig, mp.schema.Name)
	}
	for i := range mp.fields {
		pf := &mp.fields[i]
		key := pf.sf.DBName
		cur, ok := m[key]
		if !ok {
			if cur, ok = m[pf.sf.Name]; ok {
				key = pf.sf.Name
			}
		}
		if ok && !isZero(cur) {
			continue
		}
		v := reflect.New(pf.sf.FieldType).Elem()
		if err := pf.f.Fill(ctx, pf.gen, v); err != nil {
			return err
		}
		m[key] = v.Interface()
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

// plan returns the cached plan of s, building it on first sight. Errors in
// tags and field types are cached and returned every time; a registry that
// cannot produce a generator yet (unknown kind, store down) is asked again
// next time.
func (p *Plugin) plan(ctx context.Context, log logger.Interface, s *schema.Schema) (*modelPlan, error) {
	if r, ok := p.plans.Load(s); ok {
		res := r.(planResult)
		return res.plan, res.err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.plans.Load(s); ok {
		res := r.(planResult)
		return res.plan, res.err
	}
	fields, err := p.fields(s)
	if err != nil {
		p.plans.Store(s, planResult{err: err})
		return nil, err
	}
	mp := &modelPlan{schema: s, fields: fields}
	for i := range mp.fields {
		pf := &mp.fields[i]
		if pf.gen, err = pf.f.Generator(ctx, p.cfg.registry); err != nil {
			return nil, err
		}
	}
	var desc []string
	for _, pf := range mp.fields {
		d := pf.f.Name + " <- " + pf.f.Spec.String()
		if turnOffAutoIncrement(s, pf.sf) {
			d += " (auto-increment off)"
		}
		desc = append(desc, d)
	}
	if len(desc) > 0 {
		log.Info(ctx, "idforge: model %s: %s", s.Name, strings.Join(desc, ", "))
	}
	p.plans.Store(s, planResult{plan: mp})
	return mp, nil
}

func (p *Plugin) logger(db *gorm.DB) logger.Interface {
	if p.cfg.logger != nil {
		return p.cfg.logger
	}
	return db.Logger
}

// fields lists the fields of s the plugin fills: the tagged ones, and with
// WithUntaggedPrimaryKeys an untagged 64-bit integer primary key.
func (p *Plugin) fields(s *schema.Schema) ([]planField, error) {
	// Plain reflection also sees tags GORM skips, on unexported fields.
	if _, err := idgen.PlanOf(s.ModelType); err != nil {
		return nil, err
	}
	var out []planField
	tagged := map[*schema.Field]bool{}
	for _, sf := range s.Fields {
		f, err := idgen.FromStructField(s.Name, strings.Join(sf.BindNames, "."), sf.StructField)
		if err != nil {
			return nil, err
		}
		if f != nil {
			out = append(out, planField{sf: sf, f: f})
			tagged[sf] = true
		}
	}
	if !p.cfg.untagged || len(s.PrimaryFields) != 1 {
		return out, nil
	}
	pk := s.PrimaryFields[0]
	if tagged[pk] || explicitAutoIncrement(pk) || (pk.GORMDataType != schema.Int && pk.GORMDataType != schema.Uint) {
		return out, nil
	}
	f, err := idgen.NewField(s.Name, pk.Name, pk.FieldType, p.cfg.def)
	if err != nil {
		return out, nil // not 64 bits wide: left to the database
	}
	return append(out, planField{sf: pk, f: f}), nil
}

func explicitAutoIncrement(f *schema.Field) bool {
	v, ok := f.TagSettings["AUTOINCREMENT"]
	return ok && utils.CheckTruth(v)
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
	model := db.Statement.Model
	if model == nil {
		model = value
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return err
	}
	rv := reflect.ValueOf(value)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return fmt.Errorf("%w: Fill of a nil %T", engine.ErrInvalidConfig, value)
		}
		rv = rv.Elem()
	}
	return p.fill(ctxOf(db), p.logger(db), stmt.Schema, value, rv)
}

// Prepare checks models (and the models of their associations) the way the
// first Create would, reporting every tag, type and generator error at once,
// and turns GORM's implied auto-increment off for the primary keys the plugin
// fills. Call it before db.AutoMigrate so those columns are created as plain
// BIGINT; for a table named with db.Table(name), prepare on that same
// db.Table(name). It needs the plugin registered on db.
func Prepare(db *gorm.DB, models ...any) error {
	p, err := pluginOf(db)
	if err != nil {
		return err
	}
	ctx, log := ctxOf(db), p.logger(db)
	seen := map[*schema.Schema]bool{}
	var errs []error
	var walk func(s *schema.Schema)
	walk = func(s *schema.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		if _, err := p.plan(ctx, log, s); err != nil {
			errs = append(errs, err)
		}
		for _, rel := range s.Relationships.Relations {
			walk(rel.FieldSchema)
		}
	}
	for _, m := range models {
		// AutoMigrate under db.Table(name) works on a schema cached for that
		// table name: prepare that one.
		stmt := &gorm.Statement{DB: db}
		if err := stmt.ParseWithSpecialTableName(m, db.Statement.Table); err != nil {
			errs = append(errs, err)
			continue
		}
		walk(stmt.Schema)
	}
	return errors.Join(errs...)
}

func pluginOf(db *gorm.DB) (*Plugin, error) {
	if p, ok := db.Config.Plugins[PluginName].(*Plugin); ok {
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
