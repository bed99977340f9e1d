package sharding

import (
	"context"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/idplugin"
)

// Gorm is a sharded repository over GORM: one *gorm.DB per database of the
// router, indexed like [Shard.Database]. It is safe for concurrent use.
//
// IDs are filled through the idforge GORM plugin registered on the first
// database (db.Use(idplugin.New(...))), exactly as Create would fill them,
// before rows are routed. Register the plugin on every database, so each
// treats the ID columns alike.
type Gorm struct {
	router Router
	dbs    []*gorm.DB
	cfg    config
}

// NewGorm returns a repository routing with r over dbs. It fails when dbs
// does not match the router's databases or an option is out of range.
func NewGorm(r Router, dbs []*gorm.DB, opts ...Option) (*Gorm, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	for i, db := range dbs {
		if db == nil {
			return nil, fmt.Errorf("%w: sharding.NewGorm: database %d is nil", engine.ErrInvalidConfig, i)
		}
		if _, ok := db.Config.Plugins[idplugin.PluginName]; !ok {
			return nil, fmt.Errorf("%w: sharding.NewGorm: database %d has no idforge plugin: db.Use(idplugin.New(...)) first, so rows get their IDs before they are routed",
				engine.ErrInvalidConfig, i)
		}
	}
	if len(dbs) == 0 {
		return nil, fmt.Errorf("%w: sharding.NewGorm needs at least one *gorm.DB", engine.ErrInvalidConfig)
	}
	if err := checkDatabases(r, len(dbs)); err != nil {
		return nil, err
	}
	return &Gorm{router: r, dbs: dbs, cfg: cfg}, nil
}

// Router returns the repository's router.
func (g *Gorm) Router() Router { return g.router }

// keyField finds the shard key of model's schema.
func (g *Gorm) keyField(model any) (*schema.Field, error) {
	stmt := &gorm.Statement{DB: g.dbs[0]}
	if err := stmt.Parse(model); err != nil {
		return nil, err
	}
	s := stmt.Schema
	f := s.PrioritizedPrimaryField
	if g.cfg.key != "" {
		f = s.LookUpField(g.cfg.key)
	}
	if f == nil {
		what := "a single primary key"
		if g.cfg.key != "" {
			what = "field " + g.cfg.key
		}
		return nil, fmt.Errorf("%w: model %s has no %s to route by", engine.ErrInvalidConfig, s.Name, what)
	}
	if err := keyKind(s.Name, f.Name, f.FieldType); err != nil {
		return nil, err
	}
	return f, nil
}

// Create inserts value, a pointer to a struct or a slice of structs or of
// pointers: it fills the IDs through the plugin, routes every row, and
// inserts each shard's rows into its database and table in batches of the
// configured size (one transaction per shard). IDs and anything else GORM
// writes back (timestamps, defaults) reach value's rows. A failure is a
// *[ShardError] naming the shard; shards before it were written.
func (g *Gorm) Create(ctx context.Context, value any) error {
	rows, elem, err := rowsOf(value)
	if err != nil || len(rows) == 0 {
		return err
	}
	if err := idplugin.Fill(g.dbs[0].WithContext(ctx), value); err != nil {
		return err
	}
	f, err := g.keyField(reflect.New(elem).Interface())
	if err != nil {
		return err
	}
	groups, err := split(g.router, len(g.dbs), rows, func(row reflect.Value) (int64, error) {
		return keyValue(f.ReflectValueOf(ctx, row))
	})
	if err != nil {
		return err
	}
	for _, gr := range groups {
		tx := g.dbs[gr.shard.Database].WithContext(ctx).Table(gr.shard.TableName)
		if err := tx.CreateInBatches(gr.pointers(elem), g.cfg.batchSize).Error; err != nil {
			return &ShardError{Shard: gr.shard, Rows: len(gr.rows), Err: err}
		}
	}
	return nil
}

// DB returns the database of id's shard with its table selected, ready for
// a query: g.DB(ctx, id) then .Where(...).Updates(...).
func (g *Gorm) DB(ctx context.Context, id int64) (*gorm.DB, Shard, error) {
	s, err := routeIn(g.router, id, len(g.dbs))
	if err != nil {
		return nil, Shard{}, err
	}
	return g.dbs[s.Database].WithContext(ctx).Table(s.TableName), s, nil
}

// Scope selects id's table on a *gorm.DB the caller already picked (see
// [Gorm.DB] for the database): db.Scopes(repo.Scope(id)).First(&row). A
// routing error is added to the statement.
func (g *Gorm) Scope(id int64) func(*gorm.DB) *gorm.DB {
	return func(db *gorm.DB) *gorm.DB {
		s, err := g.router.Route(id)
		if err != nil {
			_ = db.AddError(err)
			return db
		}
		return db.Table(s.TableName)
	}
}

// FindByID reads the row with shard key id into dest (a pointer to a
// struct) from the one shard id routes to. A missing row is an error
// matching gorm.ErrRecordNotFound.
func (g *Gorm) FindByID(ctx context.Context, id int64, dest any) error {
	f, err := g.keyField(dest)
	if err != nil {
		return err
	}
	tx, s, err := g.DB(ctx, id)
	if err != nil {
		return err
	}
	cond := clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: id}
	if err := tx.Where(cond).Take(dest).Error; err != nil {
		return fmt.Errorf("sharding: find %d in %s: %w", id, s, err)
	}
	return nil
}

// ForEach calls fn for every shard, in order, with its database and table
// selected: the fan-out for counts, scans and maintenance. It stops at the
// first error, naming the shard, or when ctx ends.
func (g *Gorm) ForEach(ctx context.Context, fn func(s Shard, db *gorm.DB) error) error {
	return eachShard(ctx, g.router, len(g.dbs), func(s Shard) error {
		return fn(s, g.dbs[s.Database].WithContext(ctx).Table(s.TableName))
	})
}

// Migrate creates (or updates, as AutoMigrate does) the physical table of
// the sharded model in every shard. Each table is prepared first
// (idplugin.Prepare), so tag errors show here and the ID columns the
// plugin fills are plain BIGINT, not auto-increment.
func (g *Gorm) Migrate(ctx context.Context, model any) error {
	return g.ForEach(ctx, func(_ Shard, db *gorm.DB) error {
		if err := idplugin.Prepare(db, model); err != nil {
			return err
		}
		return db.AutoMigrate(model)
	})
}
