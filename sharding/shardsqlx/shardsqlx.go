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
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
	"github.com/idforge/idforge/sqlhook"
)

// Repository is a sharded repository over sqlx: one *sqlx.DB per database of
// the router, indexed like [sharding.Shard.Database]. It is safe for
// concurrent use; one returned by [Repository.In] is as safe as its
// transaction (that is, not).
type Repository struct {
	*shared
	tx   *sqlx.Tx        // the caller's transaction, for a Repository of In
	only *sharding.Shard // the shard of tx
}

// shared is what a Repository and those of its In share.
type shared struct {
	base  *repo.Base[sqlx.DB]
	p     engine.Provider
	ids   *sqlhook.Helper
	types sync.Map // reflect.Type -> *rowType
}

// New returns a repository routing with r over dbs, one per database of the
// router, drawing IDs from p (an idforge registry), configured by at most
// one [sharding.Settings]. A nil or typed-nil
// provider or router (a nil *idforge.Registry would otherwise fall back on
// the default registry, machine 0 on every instance), a database given
// twice (two pools reaching one database too: New asks each database its
// server and name, or SQLite its file), a count of databases other than the router uses, or settings out
// of range is an error wrapping engine.ErrInvalidConfig.
// A database that does not answer New's question fails New with its
// error.
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
func New(dbs []*sqlx.DB, r *sharding.Router, p engine.Provider, s ...sharding.Settings) (*Repository, error) {
	if repo.IsNil(p) {
		return nil, fmt.Errorf("%w: shardsqlx.New: the provider IDs are drawn from is nil (%T): give it an idforge registry",
			engine.ErrInvalidConfig, p)
	}
	x := &Repository{shared: &shared{p: p, ids: sqlhook.New(p)}}
	b, err := repo.New("shardsqlx.New", dbs, r, s, repo.ORM[sqlx.DB]{
		Sequences: x.sequences,
		Floor:     tableFloor,
		Database: func(db *sqlx.DB) (any, string, error) {
			return repo.PoolIdentity(db.DB, nil, dialectOf(db.DriverName()))
		},
		Dialect: func(db *sqlx.DB) string { return dialectOf(db.DriverName()) },
	})
	if err != nil {
		return nil, err
	}
	x.base = b
	return x, nil
}

// rowType is what the repository knows of one struct type: its columns, the
// shard key and its statements.
type rowType struct {
	cols  []*reflectx.FieldInfo
	names []string // the columns' names, unquoted
	key   *reflectx.FieldInfo
	id    *reflectx.FieldInfo // the integer "id" column, nil without one
}

// quoted lists the columns quoted for dialect, joined by ", ". The
// statements of a row type quote every column, so one may be named by a
// keyword ("order") or in upper case ("Group", which PostgreSQL folds
// unquoted).
func (rt *rowType) quoted(dialect string) string {
	q := make([]string, len(rt.names))
	for i, n := range rt.names {
		q[i] = repo.Quote(dialect, n)
	}
	return strings.Join(q, ", ")
}

// insert is the INSERT of named values (:name) of every column.
func (rt *rowType) insert(dialect string) string {
	return "INSERT INTO " + repo.Table + " (" + rt.quoted(dialect) + ") VALUES (:" + strings.Join(rt.names, ", :") + ")"
}

// sel is the SELECT of every column.
func (rt *rowType) sel(dialect string) string {
	return "SELECT " + rt.quoted(dialect) + " FROM " + repo.Table
}

// find is sel of the rows whose shard key is '?'.
func (rt *rowType) find(dialect string) string {
	return rt.sel(dialect) + " WHERE " + repo.Quote(dialect, rt.key.Path) + " = ?"
}

// stored selects the IDs among '?' (expanded by sqlx.In) that are stored.
func (rt *rowType) stored(dialect string) string {
	id := repo.Quote(dialect, rt.id.Path)
	return "SELECT " + id + " FROM " + repo.Table + " WHERE " + id + " IN (?)"
}

// rowTypeOf builds, or returns the cached, rowType of elem.
func (x *shared) rowTypeOf(elem reflect.Type) (*rowType, error) {
	if rt, ok := x.types.Load(elem); ok {
		return rt.(*rowType), nil
	}
	sm := x.base.DBs[0].Mapper.TypeMap(elem)
	rt := &rowType{}
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
		rt.names = append(rt.names, fi.Path)
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
	if len(rt.cols) == 0 {
		return nil, fmt.Errorf("%w: %s has no columns", engine.ErrInvalidConfig, elem)
	}
	if rt.id = sm.GetByPath("id"); rt.id != nil && repo.KeyKind(elem.String(), "id", rt.id.Field.Type) != nil {
		rt.id = nil
	}
	cached, _ := x.types.LoadOrStore(elem, rt)
	return cached.(*rowType), nil
}

// sequences is [repo.Floors.Sequences]: the columns of elem whose tagged
// fields draw from a sequence.
func (x *shared) sequences(elem reflect.Type) (engine.Provider, []idgen.Column, error) {
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

// tableFloor is [repo.ORM.Floor]. The table and the column are quoted as
// the repository's own statements write them, so that the floor reads
// the tables the rows went to (a dotted name is schema and table).
func tableFloor(db *sqlx.DB, s sharding.Shard, c idgen.Column) engine.Floor {
	dialect := dialectOf(db.DriverName())
	return c.Field.Floor(dialect, repo.Quote(dialect, s.TableName), repo.Quote(dialect, c.Name), func(ctx context.Context, q string, dest *sql.NullString) error {
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

// hasTable reports whether table, named as a quoted statement names it,
// exists on db.
func hasTable(ctx context.Context, db *sqlx.DB, dialect, table string) (bool, error) {
	var n int
	var err error
	schema, name, dotted := strings.Cut(table, ".")
	switch {
	case dialect == "postgres":
		// to_regclass resolves the name as a statement would: through the
		// search path or the schema given.
		err = db.GetContext(ctx, &n, "SELECT COUNT(to_regclass($1))", repo.Quote(dialect, table))
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
// routes every row, and writes each shard's part into its database and
// table in a transaction of its own, one row too, in multi-row INSERTs of
// at most the batch size.
//
// The statement is written from the struct: every column sqlx maps at the
// top level (a `db` tag, or the lower-cased field name; `db:"-"` leaves a
// field out; embedded structs add their columns), the table and the
// columns quoted, so a column may be named by a keyword or in upper case:
//
//	INSERT INTO "course_1" ("id", "name", "user_id") VALUES (:id, :name, :user_id), ...
//
// A failed part is a *[sharding.ShardError] naming the shard, the rows
// written and those pending; the part was rolled back unless the error
// wraps [sharding.ErrOutcomeUnknown] (COMMIT was cut off; a COMMIT the
// server refused is its error, the part rolled back). A BEGIN on a pooled
// connection the server has ended, where nothing ran, is tried again on
// another, a fresh one once the idle ones are tried. Create is
// idempotent: a row whose integer "id" column was set before the call and
// is stored in its shard is skipped, so calling Create again with the same
// rows after any error finishes the batch without duplicates (a struct
// without an "id" column gets no such skipping). A batch spanning shards is not one transaction: see
// [Repository.In] to join a transaction of yours on one shard. In a
// Repository of In, every row must route to its shard (else nothing is
// written and the error wraps [sharding.ErrWrongShard]); the rows are
// inserted behind a savepoint, so a failure rolls back to it and leaves
// the transaction usable.
func (x *Repository) Create(ctx context.Context, value any) error {
	if err := x.ready(ctx, "Create"); err != nil {
		return err
	}
	tx, only := x.tx, x.only
	var rt *rowType
	return x.base.Create(value, repo.Rows[sqlx.DB]{
		Plan: func(elem reflect.Type) (repo.Plan, error) {
			var err error
			if rt, err = x.rowTypeOf(elem); err != nil {
				return repo.Plan{}, err
			}
			read := func(fi *reflectx.FieldInfo) func(reflect.Value) (int64, error) {
				return func(row reflect.Value) (int64, error) {
					return repo.KeyValue(reflectx.FieldByIndexesReadOnly(row, fi.Index))
				}
			}
			p := repo.Plan{Key: read(rt.key), Columns: len(rt.cols), KeyIsID: rt.id != nil && rt.id == rt.key}
			if rt.id != nil {
				p.ID = read(rt.id)
				p.SetID = func(row reflect.Value, v int64) error {
					return repo.SetKeyValue(reflectx.FieldByIndexes(row, rt.id.Index), v)
				}
			}
			return p, nil
		},
		Fill: func(value any) error { return x.ids.Fill(ctx, value) },
		Begin: func(db *sqlx.DB, s sharding.Shard) (repo.Conn, error) {
			var c repo.Conn
			in := tx
			if in == nil {
				t, err := db.BeginTxx(ctx, nil)
				if err != nil {
					return c, err
				}
				in, c.Commit, c.Rollback = t, t.Commit, t.Rollback
			}
			d := dialectOf(db.DriverName())
			insert := withTable(db, s, rt.insert(d))
			c.Stored = func(ids []int64) ([]int64, error) {
				q, args, err := sqlx.In(withTable(db, s, rt.stored(d)), ids)
				if err != nil {
					return nil, err
				}
				var found []int64
				return found, in.SelectContext(ctx, &found, db.Rebind(q), args...)
			}
			c.Insert = func(rows any) error {
				_, err := sqlx.NamedExecContext(ctx, in, insert, rows)
				return err
			}
			if only == nil {
				return c, nil
			}
			return repo.Savepoint(func(q string) error { _, err := in.ExecContext(ctx, q); return err }, c)
		},
		Only: only,
	})
}

// withTable fills s's table into query, quoted for db.
func withTable(db *sqlx.DB, s sharding.Shard, query string) string {
	return strings.ReplaceAll(query, repo.Table, repo.Quote(dialectOf(db.DriverName()), s.TableName))
}

// Query returns query, a statement of yours for shard s on db (the
// database of [Repository.DB] or [Repository.ForEach]), with {table}
// replaced by s's table quoted for db's driver, as the repository's own
// statements write it, and '?' placeholders rebound for the driver:
//
//	db.GetContext(ctx, &n, shardsqlx.Query(db, s, "SELECT COUNT(*) FROM {table} WHERE user_id = ?"), 7)
func Query(db *sqlx.DB, s sharding.Shard, query string) string {
	return db.Rebind(withTable(db, s, query))
}

// Find reads the rows whose shard key is key (its "id" column, unless
// [sharding.Settings.ShardKey] named another), from the one shard key
// routes to, selecting the struct's columns, into dest: a pointer to a
// slice gets all of them, ordered by "id" (none is no error): all the rows
// of an owner when rows are routed by one; a pointer to a struct gets the
// first of them by "id", and a missing row is an error matching both
// [sharding.ErrNotFound] and sql.ErrNoRows. Key 0 wraps
// engine.ErrInvalidID. In a Repository of In, it reads in the
// transaction, and a key of another shard wraps [sharding.ErrWrongShard].
func (x *Repository) Find(ctx context.Context, key int64, dest any) error {
	if err := x.ready(ctx, "Find"); err != nil {
		return err
	}
	tx, only := x.tx, x.only
	elem, many, err := repo.FindDest(dest)
	if err != nil {
		return err
	}
	rt, err := x.rowTypeOf(elem)
	if err != nil {
		return err
	}
	return x.base.Find(key, only, func(db *sqlx.DB, s sharding.Shard) error {
		d := dialectOf(db.DriverName())
		find := rt.find(d)
		if rt.id != nil && (many || rt.id != rt.key) {
			find += " ORDER BY " + repo.Quote(d, rt.id.Path)
		}
		var q sqlx.QueryerContext = db
		if tx != nil {
			q = tx
		}
		if many {
			return sqlx.SelectContext(ctx, q, dest, Query(db, s, find), key)
		}
		if rt.id != nil && rt.id != rt.key {
			return sqlx.GetContext(ctx, q, dest, Query(db, s, find+" LIMIT 1"), key)
		}
		return sqlx.GetContext(ctx, q, dest, Query(db, s, find), key)
	}, func(err error) bool { return errors.Is(err, sql.ErrNoRows) })
}

// DB returns the database of key's shard and the shard; [Query] fills the
// shard's table into a statement:
//
//	db, s, err := repo.DB(id)
//	_, err = db.ExecContext(ctx, shardsqlx.Query(db, s, "UPDATE {table} SET name = ? WHERE id = ?"), "go", id)
//
// The statements are yours: nothing checks that they stay in the shard
// (a *sqlx.DB runs any SQL; database/sql gives no hook to see it). Write
// through [Repository.Update], [Repository.Delete] and [Repository.Exec]
// to have the repository route and check them. In a Repository of In, a
// key of another shard wraps [sharding.ErrWrongShard], and the database
// returned is the pool, outside the transaction: run your statements on
// the transaction, with [Query] filling in the table.
func (x *Repository) DB(key int64) (*sqlx.DB, sharding.Shard, error) {
	if err := x.ready(context.Background(), "DB"); err != nil {
		return nil, sharding.Shard{}, err
	}
	db, s, err := x.base.Route(key)
	if err == nil {
		err = repo.Within(x.only, s, "key", key)
	}
	if err != nil {
		return nil, sharding.Shard{}, err
	}
	return db, s, nil
}

// In returns the repository inside tx, a transaction the caller began on
// the database of key's shard (db.BeginTxx, db from [Repository.DB]),
// bound to that shard: its Create, Get, Find, Page, Count, Update, Delete
// and Exec run in tx on that one shard, so they commit or roll back with
// it; its DB knows that shard alone, and its ForEach, whose fn would get
// the pool outside tx, is refused. In asks tx which database it is on (the
// server and the database name, as [New] asks each database): a
// transaction of another database wraps [sharding.ErrWrongShard]; a nil
// tx, or In on a repository of In, wraps engine.ErrInvalidConfig.
// There is no transaction across shards: see "Transactions" in package
// [sharding].
func (x *Repository) In(key int64, tx *sqlx.Tx) (*Repository, error) {
	if err := x.ready(context.Background(), "In"); err != nil {
		return nil, err
	}
	_, s, err := x.base.Route(key)
	if err != nil {
		return nil, err
	}
	switch {
	case x.tx != nil:
		return nil, fmt.Errorf("%w: shardsqlx: In(%d, tx) on a repository already inside a transaction", engine.ErrInvalidConfig, key)
	case tx == nil:
		return nil, fmt.Errorf("%w: shardsqlx: In(%d, nil)", engine.ErrInvalidConfig, key)
	}
	if err := x.base.InDatabase(context.Background(), key, s, tx); err != nil {
		return nil, err
	}
	return &Repository{shared: x.shared, tx: tx, only: &s}, nil
}

// ForEach calls fn for every shard, in the router's order, with its
// database: the fan-out for counts, scans and maintenance (fill the table
// in with [Query]). It stops at the first error, naming the shard, or when
// ctx ends. The statements fn runs are its own: nothing checks that they
// stay in the shard. In a Repository of In, ForEach is refused with an
// error wrapping engine.ErrInvalidConfig: fn would get the pool, and run
// outside the transaction.
func (x *Repository) ForEach(ctx context.Context, fn func(s sharding.Shard, db *sqlx.DB) error) error {
	if err := x.ready(ctx, "ForEach"); err != nil {
		return err
	}
	if x.only != nil {
		return fmt.Errorf("%w: shardsqlx: ForEach of a repository inside a transaction would run outside it: run the statements on the transaction, with Query", engine.ErrInvalidConfig)
	}
	return x.base.ForEach(ctx, fn)
}

// Exec runs query in every shard with {table} replaced by the shard's
// table, quoted for the database, and '?' placeholders rebound for the
// driver: "CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, ...)".
// In a Repository of In, it runs in the transaction, in its one shard.
func (x *Repository) Exec(ctx context.Context, query string, args ...any) error {
	if err := x.ready(ctx, "Exec"); err != nil {
		return err
	}
	var in *sqlx.DB
	if x.only != nil {
		in = x.base.DBs[x.only.Database]
	}
	return x.base.Exec(ctx, query, x.only, in, func(db *sqlx.DB, q string) error {
		var e sqlx.ExecerContext = db
		if x.tx != nil {
			e = x.tx
		}
		_, err := e.ExecContext(ctx, db.Rebind(q), args...)
		return err
	})
}

// ready checks a call of method verb ([repo.Ready]).
func (x *Repository) ready(ctx context.Context, verb string) error {
	var b *repo.Base[sqlx.DB]
	if x != nil && x.shared != nil {
		b = x.base
	}
	return repo.Ready(ctx, b, "shardsqlx.Repository."+verb)
}
