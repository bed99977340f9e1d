package shardgorm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
	"github.com/idforge/idforge/sharding/internal/sqlroute"
)

// ErrUnrouted is wrapped by the error of a statement on a sharded model
// that names no shard key (nor, where IDs route, an ID) in its conditions,
// when the plugin is told to refuse such statements: a read with
// [PluginSettings.RefuseUnrouted], an update or delete unless
// [PluginSettings.AllowUnroutedWrites], and a raw statement always; and
// of a raw read whose keys reach several shards. The error names the
// model and the columns it routes by.
var ErrUnrouted = errors.New("shardgorm: statement on a sharded model not routed")

// PluginSettings configures a [Plugin]. The zero value is the default.
type PluginSettings struct {
	// Settings are the repository's: the shard key, the batch size, how
	// many shards a statement reaches at once, owner-keyed IDs.
	Settings sharding.Settings
	// RefuseUnrouted makes a read naming no shard key fail with
	// [ErrUnrouted] instead of reading every shard.
	RefuseUnrouted bool
	// AllowUnroutedWrites lets an update or delete naming no shard key
	// run on every shard (each shard in a statement of its own); without
	// it, such a statement fails with [ErrUnrouted].
	AllowUnroutedWrites bool
}

// Plugin is a GORM plugin making the models it was given sharded: once
// registered with db.Use on the *gorm.DB an application already uses, the
// GORM calls on those models (Create, First, Find, Where, Count, Pluck,
// Preload, Updates, Delete, Transaction, Exec and Raw) reach the physical
// tables the router names, over one *gorm.DB per database. Build it with
// [NewPlugin]. Other models are untouched.
//
// The plugin sits on a [Repository] of the same databases: a Create is the
// repository's, each shard's part in a transaction of its own, and fails
// with a *[sharding.ShardError]. See "The GORM plugin" in docs/sharding.md
// for what routes, what fans out and what is refused.
type Plugin struct {
	g      *Repository
	set    PluginSettings
	models []any

	byTable  map[string]*pmodel // logical table (as dbs[0] names it) -> model
	tables   []sqlroute.Table   // byTable as sqlroute reads it
	mu       sync.Mutex
	prepared map[int]gorm.ConnPool // database -> prepared-statement pool, made on first use
}

// pmodel is one sharded model as the plugin routes it.
type pmodel struct {
	schema   *schema.Schema
	key, id  *schema.Field // shard key; integer primary key (nil without one)
	idsRoute bool          // IDs route: the key is the ID, or IDs are owner-keyed
}

// pluginName is the plugin's name in gorm.Config.Plugins.
const pluginName = "idforge:shardgorm"

// NewPlugin returns the plugin routing models (pointers to their structs)
// with r over dbs, one *gorm.DB per database of the router, as [New]
// builds a repository over them (each needs the idforge plugin). Register
// it with db.Use on the application's *gorm.DB, which may be dbs[0] or
// another handle of the same dialect. No model, a model given twice, or a
// model without the shard key is an error wrapping engine.ErrInvalidConfig;
// so is anything [New] refuses.
func NewPlugin(dbs []*gorm.DB, r *sharding.Router, s PluginSettings, models ...any) (*Plugin, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("%w: shardgorm.NewPlugin: no model to shard", engine.ErrInvalidConfig)
	}
	g, err := New(dbs, r, s.Settings)
	if err != nil {
		return nil, err
	}
	p := &Plugin{g: g, set: s, models: models, byTable: map[string]*pmodel{}, prepared: map[int]gorm.ConnPool{}}
	shards, err := r.Shards()
	if err != nil {
		return nil, fmt.Errorf("shardgorm.NewPlugin: %w", err)
	}
	seen := map[string]sharding.Shard{}
	for _, sh := range shards {
		name := fmt.Sprint(sh.Database, ".", (&pmodel{schema: &schema.Schema{Table: "t"}}).table(sh))
		if o, dup := seen[name]; dup {
			return nil, fmt.Errorf("%w: shardgorm.NewPlugin: the router's tables %s and %s end with the same number, which names a model's table in a shard",
				engine.ErrInvalidConfig, o, sh)
		}
		seen[name] = sh
	}
	for _, m := range models {
		pm, err := p.parse(dbs[0], m)
		if err != nil {
			return nil, err
		}
		if _, dup := p.byTable[pm.schema.Table]; dup {
			return nil, fmt.Errorf("%w: shardgorm.NewPlugin: model %s given twice (table %s)", engine.ErrInvalidConfig, pm.schema.Name, pm.schema.Table)
		}
		if err := p.floorsRead(pm, shards[0]); err != nil {
			return nil, err
		}
		p.byTable[pm.schema.Table] = pm
	}
	p.tables = sqlTables(p.byTable)
	return p, nil
}

// floorsRead refuses a model whose IDs draw from a store's sequence
// ("chain", "segment") when its tables are not the router's: the Floor of
// a sequence, which restarts it above every shard after a store forgot
// it, reads the router's tables, as the repository names them.
func (p *Plugin) floorsRead(m *pmodel, s sharding.Shard) error {
	if m.table(s) == s.TableName {
		return nil
	}
	_, seqs, err := p.g.sequences(m.schema.ModelType)
	if err != nil {
		return err
	}
	if len(seqs) > 0 {
		return fmt.Errorf("%w: shardgorm.NewPlugin: model %s draws column %s from a sequence, whose Floor reads the router's tables (%s), not the model's (%s): "+
			"give the model a plugin whose router names its tables, or draw its IDs from a snowflake", engine.ErrInvalidConfig, m.schema.Name, seqs[0].Name, s.TableName, m.table(s))
	}
	return nil
}

// Name implements gorm.Plugin.
func (p *Plugin) Name() string { return pluginName }

// Initialize implements gorm.Plugin: it checks that db speaks the
// databases' dialect, makes db's transactions the plugin's, and registers
// the callbacks that route the models' statements on db and on the
// databases (associations saved with a row in its shard are statements
// there). The models' tables are named as the first database names them.
func (p *Plugin) Initialize(db *gorm.DB) error {
	if p == nil || p.g == nil {
		return fmt.Errorf("%w: shardgorm: a nil or zero Plugin: make one with NewPlugin", engine.ErrInvalidConfig)
	}
	for i, d := range p.g.base.DBs {
		if d.Dialector.Name() != db.Dialector.Name() {
			return fmt.Errorf("%w: shardgorm: the plugin's database %d is %s, the database it is registered on %s: statements are built for the one and run on the other",
				engine.ErrInvalidConfig, i, d.Dialector.Name(), db.Dialector.Name())
		}
	}
	wrap(db)
	// The shards' databases route too: associations saved with a row in
	// its shard's transaction are the models' statements there.
	for _, d := range append([]*gorm.DB{db}, p.g.base.DBs...) {
		if d.Callback().Create().Get(createName) != nil {
			continue
		}
		if err := p.register(d); err != nil {
			return err
		}
	}
	return nil
}

// parse learns model's schema under db's naming and its routing columns.
func (p *Plugin) parse(db *gorm.DB, model any) (*pmodel, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return nil, fmt.Errorf("%w: shardgorm.NewPlugin: model %T: %w", engine.ErrInvalidConfig, model, err)
	}
	s := stmt.Schema
	if strings.Contains(s.Table, ".") {
		return nil, fmt.Errorf("%w: shardgorm.NewPlugin: model %s: table %s names a schema; shard tables are named by the router", engine.ErrInvalidConfig, s.Name, s.Table)
	}
	key, err := p.g.keyField(s)
	if err != nil {
		return nil, err
	}
	pm := &pmodel{schema: s, key: key}
	if id := s.PrioritizedPrimaryField; id != nil && id.DBName != "" && repo.KeyKind(s.Name, id.Name, id.FieldType) == nil {
		pm.id = id
	}
	pm.idsRoute = pm.id != nil && (pm.id == key || p.set.Settings.OwnerResidues > 0)
	return pm, nil
}

// modelOf returns the sharded model stmt is on, nil for any other: the
// statement names the model's logical table (a physical one is the
// plugin's own, or the caller's, and runs as written).
func (p *Plugin) modelOf(stmt *gorm.Statement) *pmodel {
	if stmt.TableExpr != nil && (len(stmt.TableExpr.Vars) > 0 || stmt.TableExpr.SQL != stmt.Quote(stmt.Table)) {
		return nil // db.Table of an expression, or of a shard's own table
	}
	return p.byTable[stmt.Table]
}

// alias points a statement at m's physical table in shard s under the
// logical name, so that what it qualifies by the logical table
// ("orders.user_id", "orders.*", GORM's conditions on the primary key and
// on associations) names the physical one. The AS is SQLite's: its UPDATE
// and DELETE read an alias only after one.
func (m *pmodel) alias(stmt *gorm.Statement, s sharding.Shard) {
	stmt.TableExpr = &clause.Expr{SQL: stmt.Quote(m.table(s)) + " AS " + stmt.Quote(m.schema.Table)}
	stmt.Table = m.schema.Table
}

// writeAs points an update or delete at m's physical table in shard s
// under the logical name, as alias does. MariaDB reads an alias in
// a DELETE only in its multi-table form, DELETE alias FROM table AS alias,
// which takes no ORDER BY or LIMIT: a MySQL delete with either keeps the
// physical name, and must not qualify columns.
func (m *pmodel) writeAs(stmt *gorm.Statement, s sharding.Shard, update bool) {
	if !update && stmt.Dialector.Name() == "mysql" {
		for _, c := range []string{"ORDER BY", "LIMIT"} {
			if _, ok := stmt.Clauses[c]; ok {
				return
			}
		}
		d, _ := stmt.Clauses["DELETE"].Expression.(clause.Delete)
		d.Modifier = strings.TrimSpace(d.Modifier + " " + stmt.Quote(m.schema.Table))
		stmt.AddClause(d)
	}
	m.alias(stmt, s)
}

// table is m's physical table in shard s: the model's table followed by
// the number the router's table name ends with ("orders_1" for the
// router's "course_1"), the model's table alone when the router's name
// ends with no number. NewPlugin checks that the numbers tell a
// database's tables apart.
func (m *pmodel) table(s sharding.Shard) string {
	n := s.TableName[len(strings.TrimRightFunc(s.TableName, func(r rune) bool { return r >= '0' && r <= '9' })):]
	if n == "" {
		return m.schema.Table
	}
	return m.schema.Table + "_" + n
}

// keys names the columns m routes by, for errors.
func (m *pmodel) keys() string {
	if m.idsRoute && m.id != m.key {
		return m.key.DBName + " or " + m.id.DBName
	}
	return m.key.DBName
}

// unrouted is the error of a statement on m naming no shard key.
func (m *pmodel) unrouted(verb string) error {
	return fmt.Errorf("%w: %s on model %s: give %s in its conditions", ErrUnrouted, verb, m.schema.Name, m.keys())
}

// Migrate creates (or updates, as AutoMigrate does) the physical tables of
// every model of the plugin in every shard, each prepared first as
// [Repository.Migrate] prepares them (idplugin.Prepare).
func (p *Plugin) Migrate(ctx context.Context) error {
	for _, model := range p.models {
		pm, err := p.parse(p.g.base.DBs[0], model)
		if err != nil {
			return err
		}
		if err := p.g.base.AddFloors(pm.schema.ModelType); err != nil {
			return err
		}
		err = p.g.base.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
			tx := db.Session(&gorm.Session{NewDB: true, Context: ctx}).Table(pm.table(s))
			if err := idplugin.Prepare(tx, model); err != nil {
				return err
			}
			return tx.AutoMigrate(model)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
