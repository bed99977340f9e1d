// Package shardsqlx is the sharded repository over sqlx: it fills IDs from
// the `idgen` struct tags the GORM plugin reads, routes every row with a
// [sharding.Router], splits a batch by shard and inserts each part into its
// database and table; Find reads one shard, ForEach and Exec fan out over
// every shard.
//
// Package [github.com/idforge/idforge/sharding/shardgorm] is the same
// repository over GORM, with the same verbs: moving from one to the other
// is a change of import. What sqlx does differently:
//
//   - sqlx has no hook to fill IDs, so [New] takes the engine.Provider
//     (an idforge registry) the IDs are drawn from, through an
//     [sqlhook.Helper];
//   - sqlx has no model, so there is no Migrate: create the tables with
//     [Repository.Exec] ("CREATE TABLE IF NOT EXISTS {table} (...)"), and
//     the statements of Create and Find are written from the struct's `db`
//     columns (see [Repository.Create]).
//
// Columns filled from a store's sequence ("chain", "segment") get a Floor
// over every shard, as with GORM: see [New].
package shardsqlx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/internal/sqlxbatch"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
	"github.com/idforge/idforge/sqlhook"
)

// Repository is a sharded repository over sqlx: one *sqlx.DB per database of
// the router, indexed like [sharding.Shard.Database]. It is safe for
// concurrent use.
type Repository struct {
	base  *repo.Base[sqlx.DB]
	p     engine.Provider
	ids   *sqlhook.Helper
	types sync.Map // reflect.Type -> *rowType
}

// New returns a repository routing with r over dbs, one per database of the
// router, drawing IDs from p (an idforge registry). A nil provider, a count
// of databases the router does not use, or an option out of range is an
// error wrapping engine.ErrInvalidConfig.
//
// Before a struct type's first Create, the repository gives p (when it
// takes floors, as an idforge registry does) the Floor of every sequence
// ("chain", "segment") the struct's columns draw from: the largest ID of
// those columns over every table of every database the router lists (a
// table not created yet counts as 0), read with SQL for each database's
// driver ("mysql"; "pgx" or "postgres"; "sqlite" or "sqlite3"), so a store
// that forgot the sequence restarts it above every shard. A router that
// cannot list its shards (an interval router without Start and End) gets a
// Floor answering engine.ErrNoFloor instead: such a store refuses the
// sequence until it has a Floor of its own (sqlstore or redisstore
// Settings.Floor) that reads every table; p's AddFloor cannot override it.
func New(r sharding.Router, p engine.Provider, dbs []*sqlx.DB, opts ...sharding.Option) (*Repository, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: shardsqlx.New needs the provider IDs are drawn from (an idforge registry)", engine.ErrInvalidConfig)
	}
	x := &Repository{p: p, ids: sqlhook.New(p)}
	b, err := repo.New("shardsqlx.New", r, dbs, opts, repo.Floors[sqlx.DB]{Sequences: x.sequences, Table: tableFloor})
	if err != nil {
		return nil, err
	}
	x.base = b
	return x, nil
}

// Router returns the repository's router.
func (x *Repository) Router() sharding.Router { return x.base.Router }

// rowType is what the repository knows of one struct type: its columns, the
// shard key and its statements.
type rowType struct {
	cols   []*reflectx.FieldInfo
	key    *reflectx.FieldInfo
	insert string // with {table}
	find   string // with {table} and one '?'
}

// rowTypeOf builds, or returns the cached, rowType of elem.
func (x *Repository) rowTypeOf(elem reflect.Type) (*rowType, error) {
	if rt, ok := x.types.Load(elem); ok {
		return rt.(*rowType), nil
	}
	sm := x.base.DBs[0].Mapper.TypeMap(elem)
	rt := &rowType{}
	var cols []string
	for _, fi := range sm.Index {
		// Columns are the fields sqlx maps at the top level, directly or
		// through embedded structs: a path with a dot is a nested struct's.
		if fi.Embedded || strings.Contains(fi.Path, ".") || sm.Paths[fi.Path] != fi {
			continue
		}
		if !plainName(fi.Path) {
			return nil, fmt.Errorf("%w: %s: column %q (db tag of %s): use letters, digits and '_' only",
				engine.ErrInvalidConfig, elem, fi.Path, fi.Field.Name)
		}
		rt.cols = append(rt.cols, fi)
		cols = append(cols, fi.Path)
	}
	keyName := x.base.Settings.ShardKey
	if keyName == "" {
		keyName = "id"
	}
	rt.key = sm.GetByPath(keyName)
	for _, fi := range sm.Index {
		if rt.key == nil && fi.Field.Name == keyName && !strings.Contains(fi.Path, ".") {
			rt.key = fi
		}
	}
	if rt.key == nil {
		return nil, fmt.Errorf("%w: %s has no column %q to route by (db tag)", engine.ErrInvalidConfig, elem, keyName)
	}
	if err := repo.KeyKind(elem.String(), rt.key.Path, rt.key.Field.Type); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: %s has no columns", engine.ErrInvalidConfig, elem)
	}
	rt.insert = "INSERT INTO " + sharding.TablePlaceholder + " (" + strings.Join(cols, ", ") +
		") VALUES (:" + strings.Join(cols, ", :") + ")"
	rt.find = "SELECT " + strings.Join(cols, ", ") + " FROM " + sharding.TablePlaceholder +
		" WHERE " + rt.key.Path + " = ?"
	cached, _ := x.types.LoadOrStore(elem, rt)
	return cached.(*rowType), nil
}

// sequences is [repo.Floors.Sequences]: the columns of elem whose tagged
// fields draw from a sequence.
func (x *Repository) sequences(elem reflect.Type) (engine.Provider, []idgen.Column, error) {
	plan, err := idgen.NewPlan(elem)
	if err != nil {
		return nil, nil, err
	}
	rt, err := x.rowTypeOf(elem)
	if err != nil {
		return nil, nil, err
	}
	var cols []idgen.Column
	for _, t := range plan.Fields {
		if !idgen.Sequence(t.Spec.Kind) {
			continue
		}
		// A field left out of the columns (`db:"-"`) has no floor to read.
		i := slices.IndexFunc(rt.cols, func(fi *reflectx.FieldInfo) bool { return slices.Equal(fi.Index, t.Index) })
		if i >= 0 {
			cols = append(cols, idgen.Column{Field: t.Field, Name: rt.cols[i].Path})
		}
	}
	return x.p, cols, nil
}

// tableFloor is [repo.Floors.Table]. Table and column are written unquoted,
// as the repository's own statements write them, so that the floor reads
// the tables the rows went to (PostgreSQL folds unquoted names to lower
// case, and a dotted name is schema and table).
func tableFloor(db *sqlx.DB, s sharding.Shard, c idgen.Column) engine.Floor {
	dialect := dialectOf(db.DriverName())
	return c.Field.Floor(dialect, s.TableName, c.Name, func(ctx context.Context, q string, dest *sql.NullString) error {
		if ok, err := hasTable(ctx, db, dialect, s.TableName); err != nil || !ok {
			return err // nil: no table yet, 0
		}
		return db.QueryRowContext(ctx, q).Scan(dest)
	})
}

// dialectOf maps a database/sql driver name to the dialect of
// idgen.Field.Floor. Another driver's name is kept: its integer keys are
// read with plain SQL, and the Floor of its string keys answers
// engine.ErrNoFloor naming it.
func dialectOf(driver string) string {
	switch driver {
	case "mysql":
		return "mysql"
	case "pgx", "pgx/v5", "postgres":
		return "postgres"
	case "sqlite", "sqlite3":
		return "sqlite"
	}
	return driver
}

// hasTable reports whether table, named as an unquoted statement names it,
// exists on db.
func hasTable(ctx context.Context, db *sqlx.DB, dialect, table string) (bool, error) {
	var n int
	var err error
	schema, name, dotted := strings.Cut(table, ".")
	switch {
	case dialect == "postgres":
		// to_regclass resolves the name as a statement would: folded,
		// through the search path or the schema given.
		err = db.GetContext(ctx, &n, "SELECT COUNT(to_regclass($1))", table)
	case dialect == "mysql" && dotted:
		err = db.GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", schema, name)
	case dialect == "mysql":
		err = db.GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table)
	case dialect == "sqlite" && dotted:
		err = db.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+schema+".sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", name)
	case dialect == "sqlite":
		err = db.GetContext(ctx, &n, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", table)
	default:
		return true, nil // unknown: read it, and fail if it is missing
	}
	return n > 0, err
}

// plainName accepts column names that need no quoting.
func plainName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// Create inserts value, a pointer to a struct or a slice of structs or of
// pointers: it fills the zero-valued idgen-tagged fields from the provider,
// routes every row, and inserts each shard's rows into its database and
// table, one transaction per shard, in multi-row INSERTs of the configured
// batch size (fewer rows when the placeholders would pass
// sqlhook.MaxPlaceholders).
//
// The statement is written from the struct: every column sqlx maps at the
// top level (a `db` tag, or the lower-cased field name; `db:"-"` leaves a
// field out; embedded structs add their columns):
//
//	INSERT INTO course_1 (id, name, user_id) VALUES (:id, :name, :user_id), ...
//
// A failure is a *[sharding.ShardError] naming the shard; shards before it
// were written.
func (x *Repository) Create(ctx context.Context, value any) error {
	var rt *rowType
	return x.base.Create(value, repo.Rows[sqlx.DB]{
		Key: func(elem reflect.Type) (func(reflect.Value) (int64, error), error) {
			var err error
			if rt, err = x.rowTypeOf(elem); err != nil {
				return nil, err
			}
			return func(row reflect.Value) (int64, error) {
				return repo.KeyValue(reflectx.FieldByIndexesReadOnly(row, rt.key.Index))
			}, nil
		},
		Fill: func(value any) error { return x.ids.Fill(ctx, value) },
		Insert: func(db *sqlx.DB, s sharding.Shard, part any) error {
			return x.insert(ctx, db, s.Query(rt.insert), part)
		},
	})
}

// insert writes one shard's rows (part is a []*T, their IDs filled by
// Create) in statements of at most the batch size, as sqlhook's InsertBatch
// does but without filling them again, in a transaction when there is more
// than one row.
func (x *Repository) insert(ctx context.Context, db *sqlx.DB, query string, part any) error {
	rows, batch := reflect.ValueOf(part), x.base.Settings.BatchSize
	if rows.Len() == 1 {
		_, err := sqlxbatch.Insert(ctx, db, query, rows, batch)
		return err
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := sqlxbatch.Insert(ctx, tx, query, rows, batch); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Find reads the row whose shard key is key (its "id" column, unless
// [sharding.WithShardKey] named another) into dest, a pointer to a struct,
// from the one shard key routes to, selecting the struct's columns. A
// missing row is an error matching both [sharding.ErrNotFound] and
// sql.ErrNoRows.
func (x *Repository) Find(ctx context.Context, key int64, dest any) error {
	t := reflect.TypeOf(dest)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: shardsqlx: Find wants a pointer to a struct, got %T", engine.ErrInvalidConfig, dest)
	}
	rt, err := x.rowTypeOf(t.Elem())
	if err != nil {
		return err
	}
	return x.base.Find(key, func(db *sqlx.DB, s sharding.Shard) error {
		return db.GetContext(ctx, dest, db.Rebind(s.Query(rt.find)), key)
	}, func(err error) bool { return errors.Is(err, sql.ErrNoRows) })
}

// DB returns the database of key's shard and the shard, whose
// [sharding.Shard.Query] fills the table into a statement:
//
//	db, s, err := repo.DB(id)
//	_, err = db.ExecContext(ctx, db.Rebind(s.Query("UPDATE {table} SET name = ? WHERE id = ?")), "go", id)
func (x *Repository) DB(key int64) (*sqlx.DB, sharding.Shard, error) {
	return x.base.Route(key)
}

// ForEach calls fn for every shard, in the router's order, with its
// database: the fan-out for counts, scans and maintenance (fill the table
// in with [sharding.Shard.Query]). It stops at the first error, naming the
// shard, or when ctx ends.
func (x *Repository) ForEach(ctx context.Context, fn func(s sharding.Shard, db *sqlx.DB) error) error {
	return x.base.ForEach(ctx, fn)
}

// Exec runs query in every shard with {table} replaced by the shard's
// table and '?' placeholders rebound for the driver:
// "CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, ...)".
func (x *Repository) Exec(ctx context.Context, query string, args ...any) error {
	return x.base.Exec(ctx, query, func(db *sqlx.DB, q string) error {
		_, err := db.ExecContext(ctx, db.Rebind(q), args...)
		return err
	})
}
