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
	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// Repository is a sharded repository over GORM: one *gorm.DB per database of
// the router, indexed like [sharding.Shard.Database]. It is safe for
// concurrent use; one returned by [Repository.In] is as safe as its
// transaction (that is, not).
type Repository struct {
	base *repo.Base[gorm.DB]
	tx   *gorm.DB        // the caller's transaction, for a Repository of In
	only *sharding.Shard // the shard of tx
}

// New returns a repository routing with r over dbs, one per database of the
// router, configured by at most one [sharding.Settings]. Every database needs the idforge plugin registered
// (db.Use(idplugin.New(...))), so rows get their IDs before they are routed,
// each database filling the ID columns alike. A missing plugin, a nil or
// typed-nil router, a database given twice (two sessions of one, or two
// pools reaching one database: New asks each database its server and
// name, or SQLite its file), a
// count of databases other than the router uses, or settings out of range
// is an error wrapping engine.ErrInvalidConfig.
// A database that does not answer New's question fails New with its
// error.
//
// New registers callbacks on each database (once per database, whatever
// the number of repositories) that refuse a write through a handle of
// [Repository.DB] or [Repository.ForEach] reaching
// another shard than the handle's: see [Repository.DB].
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
func New(dbs []*gorm.DB, r *sharding.Router, s ...sharding.Settings) (*Repository, error) {
	g := &Repository{}
	b, err := repo.New("shardgorm.New", dbs, r, s, repo.ORM[gorm.DB]{
		Sequences: g.sequences,
		Floor:     tableFloor,
		Database: func(db *gorm.DB) (any, string, error) {
			if db.Config == nil || db.Statement == nil {
				return nil, "", fmt.Errorf("%w: a zero gorm.DB: open it with gorm.Open", engine.ErrInvalidConfig)
			}
			pool, err := db.DB()
			return repo.PoolIdentity(pool, err, db.Dialector.Name())
		},
		Dialect: func(db *gorm.DB) string { return db.Dialector.Name() },
	})
	if err != nil {
		return nil, err
	}
	for i, db := range dbs {
		if _, ok := db.Config.Plugins[idplugin.New().Name()]; !ok {
			return nil, fmt.Errorf("%w: shardgorm.New: database %d has no idforge plugin: db.Use(idplugin.New(...)) first, so rows get their IDs before they are routed",
				engine.ErrInvalidConfig, i)
		}
		if err := registerGuard(db); err != nil {
			return nil, fmt.Errorf("shardgorm.New: database %d: %w", i, err)
		}
	}
	g.base = b
	return g, nil
}

// sequences is [repo.ORM.Sequences]: the columns the first database's
// plugin fills from a sequence, and its registry.
func (g *Repository) sequences(elem reflect.Type) (engine.Provider, []idgen.Column, error) {
	s, err := g.schema(reflect.New(elem).Interface())
	if err != nil {
		return nil, nil, err
	}
	cols, err := gormids.Of(g.base.DBs[0])
	if err != nil {
		return nil, nil, err
	}
	seqs, err := cols.Sequences(s)
	return cols.Registry, seqs, err
}

// tableFloor is [repo.ORM.Floor], names quoted as the repository's GORM
// statements quote them.
func tableFloor(db *gorm.DB, s sharding.Shard, c idgen.Column) engine.Floor {
	return gormids.Floor(db, s.TableName, c)
}

// schema parses model's schema.
func (g *Repository) schema(model any) (*schema.Schema, error) {
	stmt := &gorm.Statement{DB: g.base.DBs[0]}
	if err := stmt.Parse(model); err != nil {
		return nil, err
	}
	return stmt.Schema, nil
}

// keyField finds the shard key of schema s.
func (g *Repository) keyField(s *schema.Schema) (*schema.Field, error) {
	key := g.base.Settings.ShardKey
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

// plan is [repo.Rows.Plan], and the integer primary key (nil without one)
// by which stored rows are found.
func (g *Repository) plan(ctx context.Context, elem reflect.Type) (repo.Plan, *schema.Field, error) {
	s, err := g.schema(reflect.New(elem).Interface())
	if err != nil {
		return repo.Plan{}, nil, err
	}
	key, err := g.keyField(s)
	if err != nil {
		return repo.Plan{}, nil, err
	}
	id := s.PrioritizedPrimaryField
	if id != nil && repo.KeyKind(s.Name, id.Name, id.FieldType) != nil {
		id = nil
	}
	cols := 0
	for _, f := range s.Fields {
		if f.DBName != "" && f.Creatable {
			cols++
		}
	}
	read := func(f *schema.Field) func(reflect.Value) (int64, error) {
		return func(row reflect.Value) (int64, error) { return repo.KeyValue(f.ReflectValueOf(ctx, row)) }
	}
	p := repo.Plan{Key: read(key), Columns: cols, KeyIsID: id != nil && id == key}
	if id != nil {
		p.ID = read(id)
		p.SetID = func(row reflect.Value, v int64) error { return repo.SetKeyValue(id.ReflectValueOf(ctx, row), v) }
	}
	return p, id, nil
}

// Create inserts value, a pointer to a struct or a slice of structs or of
// pointers: it fills the IDs through the plugin, routes every row, and
// writes each shard's part into its database and table in a transaction
// of its own (whatever gorm.Config.SkipDefaultTransaction says), in
// statements of at most the batch size. IDs and anything else GORM writes
// back (timestamps, defaults) reach value's rows.
//
// A failed part is a *[sharding.ShardError] naming the shard, the rows
// written and those pending; the part was rolled back unless the error
// wraps [sharding.ErrOutcomeUnknown] (COMMIT was cut off; a COMMIT the
// server refused is its error, the part rolled back). A BEGIN on a pooled
// connection the server has ended, where nothing ran, is tried again on
// another, a fresh one once the idle ones are tried. Create is
// idempotent: a row whose integer primary key was set before the call and
// is stored in its shard is skipped, so calling Create again with the same
// rows after any error finishes the batch without duplicates (a model
// without one single integer primary key gets no such skipping). A batch spanning shards is
// not one transaction: see [Repository.In] to join a transaction of yours
// on one shard. In a Repository of In, every row must route to its shard
// (else nothing is written and the error wraps [sharding.ErrWrongShard]);
// the rows are inserted behind a savepoint, so a failure rolls back to it
// and leaves the transaction usable.
//
// An error in the rows given (a nil row) matches both
// [engine.ErrInvalidData] and gorm.ErrInvalidData, as the plugin's do.
func (g *Repository) Create(ctx context.Context, value any) error {
	if err := g.ready(ctx, "Create"); err != nil {
		return err
	}
	tx, only := g.tx, g.only
	var idCol string
	return gormids.InvalidData(g.base.Create(value, repo.Rows[gorm.DB]{
		Plan: func(elem reflect.Type) (repo.Plan, error) {
			p, id, err := g.plan(ctx, elem)
			if id != nil {
				idCol = id.DBName
			}
			return p, err
		},
		Fill: func(value any) error { return idplugin.Fill(g.base.DBs[0].WithContext(ctx), value) },
		Begin: func(db *gorm.DB, s sharding.Shard) (repo.Conn, error) {
			on := func(tx *gorm.DB) *gorm.DB { return tx.Session(&gorm.Session{NewDB: true}).Table(s.TableName) }
			var c repo.Conn
			in := tx
			if in == nil {
				in = db.WithContext(ctx).Begin()
				if in.Error != nil {
					return c, in.Error
				}
				c.Commit = func() error { return in.Commit().Error }
				c.Rollback = func() error { return in.Rollback().Error }
			}
			in = in.Session(&gorm.Session{NewDB: true, Context: ctx})
			c.Stored = func(ids []int64) ([]int64, error) {
				var found []int64
				col := clause.Column{Name: idCol}
				// Selected as a column, quoted: Pluck alone writes a name
				// with a space ("row id") raw.
				sel := clause.Select{Columns: []clause.Column{col}}
				return found, on(in).Clauses(sel).Where(clause.IN{Column: col, Values: anys(ids)}).Pluck(idCol, &found).Error
			}
			c.Insert = func(rows any) error { return on(in).Create(rows).Error }
			if only == nil {
				return c, nil
			}
			return repo.Savepoint(func(q string) error { return in.Exec(q).Error }, c)
		},
		Only: only,
	}))
}

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// Find reads the rows whose shard key is key (its ID, unless
// [sharding.Settings.ShardKey] named another field), from the one shard
// key routes to, into dest: a pointer to a slice gets all of them, ordered
// by primary key (none is no error): all the rows of an owner when rows
// are routed by one; a pointer to a struct gets the first of them by
// primary key, and a missing row is an error matching both
// [sharding.ErrNotFound] and gorm.ErrRecordNotFound. Key 0 wraps
// engine.ErrInvalidID. In a Repository of In, it reads in the
// transaction, and a key of another shard wraps [sharding.ErrWrongShard].
func (g *Repository) Find(ctx context.Context, key int64, dest any) error {
	if err := g.ready(ctx, "Find"); err != nil {
		return err
	}
	tx, only := g.tx, g.only
	elem, many, err := repo.FindDest(dest)
	if err != nil {
		return err
	}
	s, err := g.schema(reflect.New(elem).Interface())
	if err != nil {
		return err
	}
	f, err := g.keyField(s)
	if err != nil {
		return err
	}
	pk := s.PrioritizedPrimaryField
	return g.base.Find(key, only, func(db *gorm.DB, s sharding.Shard) error {
		if tx != nil {
			db = tx
		}
		cond := clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: key}
		q := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx).Table(s.TableName).Where(cond)
		if pk != nil && (many || pk != f) {
			q = q.Order(clause.OrderByColumn{Column: clause.Column{Table: clause.CurrentTable, Name: pk.DBName}})
		}
		if many {
			return q.Find(dest).Error
		}
		return q.Take(dest).Error
	}, func(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) })
}

// DB returns a new session on the database of key's shard with the
// shard's table selected, and the shard:
//
//	db, _, err := repo.DB(id)
//	err = db.WithContext(ctx).Where("id = ?", id).Update("status", "done").Error
//
// The session starts every chain afresh (conditions never pile up from one
// use to the next) and is safe to share between goroutines. It is bound to
// the shard: a create whose rows route to another shard; a create, update
// or delete on another table (db.Table("..."), another table aliased as
// this one, "course_2 AS course_1", this name in another schema or
// database, "m1.course_1", or an INSERT or UPDATE clause naming a table,
// or a DELETE's FROM clause naming one); or an update or upsert
// (clause.OnConflict's DoUpdates) setting a column that routes rows (the
// shard key, and the ID when IDs route) to anything but an integer
// routing to this shard (or, in an upsert, the inserted row's own value),
// fails with an error
// wrapping [sharding.ErrWrongShard] and writes nothing, in its
// transactions too (db.Transaction(func(tx *gorm.DB) error { ... })).
// With owner-keyed IDs ([sharding.Settings.OwnerResidues]), a row created
// must hold an ID of its owner's residue, and the new owner or ID must
// keep the residue of the rows' owner, which the statement has to tell
// (Where(map[string]any{"customer_id": 4}), Model(&row)); an upsert of
// every column (UpdateAll), which sets the owner whatever row it meets,
// is refused.
// A chain restarted with db.Session(&gorm.Session{NewDB: true}) leaves
// the binding behind, as it leaves the table, and statements written by
// hand (db.Exec, db.Raw) are not checked: write
// through [Repository.Update], [Repository.Delete] and [Repository.Exec]
// to have the repository route them. In a Repository
// of In, the session is of the transaction, and a key of another shard
// wraps [sharding.ErrWrongShard].
func (g *Repository) DB(key int64) (*gorm.DB, sharding.Shard, error) {
	if err := g.ready(context.Background(), "DB"); err != nil {
		return nil, sharding.Shard{}, err
	}
	db, s, err := g.base.Route(key)
	if err != nil {
		return nil, sharding.Shard{}, err
	}
	if g.tx != nil {
		if err := repo.Within(g.only, s, "key", key); err != nil {
			return nil, sharding.Shard{}, err
		}
		db = g.tx
	}
	return g.bind(db.Session(&gorm.Session{NewDB: true}), s).Session(&gorm.Session{}), s, nil
}

// In returns the repository inside tx, a transaction the caller began on
// the database of key's shard (db.Begin(), or the tx of db.Transaction, db
// from [Repository.DB]), bound to that shard: its Create, Get, Find,
// Page, Count, Update, Delete, DB, ForEach, Exec and Migrate run in tx on
// that one shard, so they commit or roll back with it. A tx of another database, or a *gorm.DB that is no
// transaction, is an error wrapping [sharding.ErrWrongShard] or
// engine.ErrInvalidConfig, and so is In on a repository of In.
// There is no transaction across shards: see "Transactions" in package
// [sharding].
func (g *Repository) In(key int64, tx *gorm.DB) (*Repository, error) {
	if err := g.ready(context.Background(), "In"); err != nil {
		return nil, err
	}
	db, s, err := g.base.Route(key)
	if err != nil {
		return nil, err
	}
	switch {
	case g.tx != nil:
		return nil, fmt.Errorf("%w: shardgorm: In(%d, tx) on a repository already inside a transaction", engine.ErrInvalidConfig, key)
	case tx == nil:
		return nil, fmt.Errorf("%w: shardgorm: In(%d, nil)", engine.ErrInvalidConfig, key)
	}
	if c, ok := tx.Statement.ConnPool.(gorm.TxCommitter); !ok || repo.IsNil(c) {
		return nil, fmt.Errorf("%w: shardgorm: In(%d, tx): tx is no transaction: begin one with db.Begin or db.Transaction", engine.ErrInvalidConfig, key)
	}
	if tx.Callback() != db.Callback() {
		return nil, fmt.Errorf("%w: shardgorm: In(%d, tx): tx is a transaction of another database than %s's", sharding.ErrWrongShard, key, s)
	}
	return &Repository{base: g.base, tx: tx, only: &s}, nil
}

// ForEach calls fn for every shard, in the router's order, with a session
// of its database with ctx and the table selected, bound to the shard as
// [Repository.DB]'s: the fan-out for counts, scans and maintenance. It
// stops at the first error, naming the shard, or when ctx ends. In a
// Repository of In, fn gets the one shard, with a session of the
// transaction.
func (g *Repository) ForEach(ctx context.Context, fn func(s sharding.Shard, db *gorm.DB) error) error {
	if err := g.ready(ctx, "ForEach"); err != nil {
		return err
	}
	if g.tx != nil {
		return g.base.ForOne(ctx, *g.only, g.tx, func(s sharding.Shard, db *gorm.DB) error {
			return fn(s, g.bind(db.Session(&gorm.Session{NewDB: true, Context: ctx}), s).Session(&gorm.Session{}))
		})
	}
	return g.base.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
		return fn(s, g.bind(db.Session(&gorm.Session{NewDB: true, Context: ctx}), s).Session(&gorm.Session{}))
	})
}

// Exec runs query in every shard with {table} replaced by the shard's
// table, quoted for the database: "DELETE FROM {table} WHERE status = ?".
// GORM's '?' placeholders are converted for the database. In a
// Repository of In, it runs in the transaction, in its one shard.
func (g *Repository) Exec(ctx context.Context, query string, args ...any) error {
	if err := g.ready(ctx, "Exec"); err != nil {
		return err
	}
	return g.base.Exec(ctx, query, g.only, g.tx, func(db *gorm.DB, q string) error {
		return db.WithContext(ctx).Exec(q, args...).Error
	})
}

// Migrate creates (or updates, as AutoMigrate does) the physical table of
// the sharded model in every shard. Each table is prepared first
// (idplugin.Prepare), so tag errors show here and the ID columns the plugin
// fills are plain BIGINT, not auto-increment. In a Repository of In, it
// migrates the one shard in the transaction.
func (g *Repository) Migrate(ctx context.Context, model any) error {
	if err := g.ready(ctx, "Migrate"); err != nil {
		return err
	}
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

// ready checks a call of method verb ([repo.Ready]).
func (g *Repository) ready(ctx context.Context, verb string) error {
	var b *repo.Base[gorm.DB]
	if g != nil {
		b = g.base
	}
	return repo.Ready(ctx, b, "shardgorm.Repository."+verb)
}
