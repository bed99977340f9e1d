// Package shardgorm is the sharded repository over GORM: it fills IDs
// through the idforge GORM plugin, routes every row with a
// [sharding.Router], splits a batch by shard and inserts each part into its
// database and table; Find reads one shard, ForEach and Exec fan out over
// every shard, Migrate creates every physical table.
//
// Package [github.com/idforge/idforge/sharding/shardsqlx] is the same
// repository over sqlx, with the same verbs: moving from one to the other
// is a change of import. What GORM does differently:
//
//   - IDs come from the plugin registered on each *gorm.DB
//     (db.Use(idplugin.New(...))), so [New] takes no generator provider;
//   - [Repository.Migrate] creates the tables from the model (sqlx has no
//     model: run the CREATE TABLE through Exec);
//   - [Repository.Scope] selects a shard's table on a *gorm.DB the caller
//     already holds, GORM's way of reusing a query.
//
// Columns filled from a store's sequence ("chain", "segment") get a Floor
// over every shard: see [New].
package shardgorm

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/gormerr"
	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// Repository is a sharded repository over GORM: one *gorm.DB per database of
// the router, indexed like [sharding.Shard.Database]. It is safe for
// concurrent use.
type Repository struct {
	base *repo.Base[gorm.DB]
}

// New returns a repository routing with r over dbs, one per database of the
// router. Every database needs the idforge plugin registered
// (db.Use(idplugin.New(...))), so rows get their IDs before they are routed,
// each database filling the ID columns alike. A missing plugin, a count of
// databases the router does not use, or an option out of range is an error
// wrapping engine.ErrInvalidConfig.
//
// The IDs are drawn from the registry of the first database's plugin. Before
// a model's first Create or Migrate, the repository gives that registry the
// Floor of every sequence ("chain", "segment") the model's columns draw
// from: the largest ID of those columns over every table of every database
// the router lists (a table not created yet counts as 0), so a store that
// forgot the sequence restarts it above every shard. A router that cannot
// list its shards (an interval router without Start and End) gets a Floor
// answering engine.ErrNoFloor instead: such a store refuses the sequence
// until it has a Floor of its own (sqlstore or redisstore Settings.Floor)
// that reads every table; the registry's AddFloor cannot override it.
func New(r sharding.Router, dbs []*gorm.DB, opts ...sharding.Option) (*Repository, error) {
	g := &Repository{}
	b, err := repo.New("shardgorm.New", r, dbs, opts, repo.Floors[gorm.DB]{Sequences: g.sequences, Table: tableFloor})
	if err != nil {
		return nil, err
	}
	for i, db := range dbs {
		if _, ok := db.Config.Plugins[idplugin.PluginName]; !ok {
			return nil, fmt.Errorf("%w: shardgorm.New: database %d has no idforge plugin: db.Use(idplugin.New(...)) first, so rows get their IDs before they are routed",
				engine.ErrInvalidConfig, i)
		}
	}
	g.base = b
	return g, nil
}

// sequences is [repo.Floors.Sequences]: the columns the first database's
// plugin fills from a sequence, and its registry.
func (g *Repository) sequences(elem reflect.Type) (engine.Provider, []idgen.Column, error) {
	db := g.base.DBs[0]
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(reflect.New(elem).Interface()); err != nil {
		return nil, nil, err
	}
	return gormids.Sequences(db, stmt.Schema)
}

// tableFloor is [repo.Floors.Table], names quoted as the repository's GORM
// statements quote them.
func tableFloor(db *gorm.DB, s sharding.Shard, c idgen.Column) engine.Floor {
	return gormids.Floor(db, s.TableName, c)
}

// Router returns the repository's router.
func (g *Repository) Router() sharding.Router { return g.base.Router }

// keyField finds the shard key of model's schema.
func (g *Repository) keyField(model any) (*schema.Field, error) {
	stmt := &gorm.Statement{DB: g.base.DBs[0]}
	if err := stmt.Parse(model); err != nil {
		return nil, err
	}
	s, key := stmt.Schema, g.base.Settings.ShardKey
	f := s.PrioritizedPrimaryField
	if key != "" {
		f = s.LookUpField(key)
	}
	if f == nil {
		what := "a single primary key"
		if key != "" {
			what = "field " + key
		}
		return nil, fmt.Errorf("%w: model %s has no %s to route by", engine.ErrInvalidConfig, s.Name, what)
	}
	if err := repo.KeyKind(s.Name, f.Name, f.FieldType); err != nil {
		return nil, err
	}
	return f, nil
}

// Create inserts value, a pointer to a struct or a slice of structs or of
// pointers: it fills the IDs through the plugin, routes every row, and
// inserts each shard's rows into its database and table in batches of the
// configured size (one transaction per shard). IDs and anything else GORM
// writes back (timestamps, defaults) reach value's rows. A failure is a
// *[sharding.ShardError] naming the shard; shards before it were written.
// An error in the rows given (a nil row) matches both
// [sharding.ErrInvalidData] and gorm.ErrInvalidData, as the plugin's do.
func (g *Repository) Create(ctx context.Context, value any) error {
	return gormerr.InvalidData(g.base.Create(value, repo.Rows[gorm.DB]{
		Key: func(elem reflect.Type) (func(reflect.Value) (int64, error), error) {
			f, err := g.keyField(reflect.New(elem).Interface())
			if err != nil {
				return nil, err
			}
			return func(row reflect.Value) (int64, error) { return repo.KeyValue(f.ReflectValueOf(ctx, row)) }, nil
		},
		Fill: func(value any) error { return idplugin.Fill(g.base.DBs[0].WithContext(ctx), value) },
		Insert: func(db *gorm.DB, s sharding.Shard, part any) error {
			return db.WithContext(ctx).Table(s.TableName).CreateInBatches(part, g.base.Settings.BatchSize).Error
		},
	}))
}

// Find reads the row whose shard key is key (its ID, unless
// [sharding.WithShardKey] named another field) into dest, a pointer to a
// struct, from the one shard key routes to. A missing row is an error
// matching both [sharding.ErrNotFound] and gorm.ErrRecordNotFound.
func (g *Repository) Find(ctx context.Context, key int64, dest any) error {
	f, err := g.keyField(dest)
	if err != nil {
		return err
	}
	return g.base.Find(key, func(db *gorm.DB, s sharding.Shard) error {
		cond := clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: key}
		return db.WithContext(ctx).Table(s.TableName).Where(cond).Take(dest).Error
	}, func(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) })
}

// DB returns the database of key's shard with the shard's table selected,
// ready for a query, and the shard:
//
//	db, _, err := repo.DB(id)
//	err = db.WithContext(ctx).Where("id = ?", id).Update("status", "done").Error
func (g *Repository) DB(key int64) (*gorm.DB, sharding.Shard, error) {
	db, s, err := g.base.Route(key)
	if err != nil {
		return nil, sharding.Shard{}, err
	}
	return db.Table(s.TableName), s, nil
}

// Scope selects key's table on a *gorm.DB the caller already picked (see
// [Repository.DB] for the database): db.Scopes(repo.Scope(id)).First(&row).
// A routing error is added to the statement.
func (g *Repository) Scope(key int64) func(*gorm.DB) *gorm.DB {
	return func(db *gorm.DB) *gorm.DB {
		s, err := g.base.Router.Route(key)
		if err != nil {
			_ = db.AddError(err)
			return db
		}
		return db.Table(s.TableName)
	}
}

// ForEach calls fn for every shard, in the router's order, with its
// database, ctx and table selected: the fan-out for counts, scans and
// maintenance. It stops at the first error, naming the shard, or when ctx
// ends.
func (g *Repository) ForEach(ctx context.Context, fn func(s sharding.Shard, db *gorm.DB) error) error {
	return g.base.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
		return fn(s, db.WithContext(ctx).Table(s.TableName))
	})
}

// Exec runs query in every shard with {table} replaced by the shard's
// table: "DELETE FROM {table} WHERE status = ?". GORM's '?' placeholders
// are converted for the database.
func (g *Repository) Exec(ctx context.Context, query string, args ...any) error {
	return g.base.Exec(ctx, query, func(db *gorm.DB, q string) error {
		return db.WithContext(ctx).Exec(q, args...).Error
	})
}

// Migrate creates (or updates, as AutoMigrate does) the physical table of
// the sharded model in every shard. Each table is prepared first
// (idplugin.Prepare), so tag errors show here and the ID columns the plugin
// fills are plain BIGINT, not auto-increment.
func (g *Repository) Migrate(ctx context.Context, model any) error {
	// Preparing binds the model's generators, whose chains fetch at once.
	if t := reflect.TypeOf(model); t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if err := g.base.AddFloors(t); err != nil {
			return err
		}
	}
	return g.ForEach(ctx, func(_ sharding.Shard, db *gorm.DB) error {
		if err := idplugin.Prepare(db, model); err != nil {
			return err
		}
		return db.AutoMigrate(model)
	})
}
