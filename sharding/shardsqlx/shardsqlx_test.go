package shardsqlx_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardsqlx"
	"github.com/idforge/idforge/tests/testdb"
)

type course struct {
	ID     int64  `db:"id" idgen:"snowflake"`
	Name   string `db:"name"`
	UserID int64  `db:"user_id"`
}

const createCourse = "CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, user_id BIGINT NOT NULL)"

func open(t *testing.T, dbs [2]testdb.DB) []*sqlx.DB {
	t.Helper()
	return []*sqlx.DB{openSqlx(t, dbs[0], nil), openSqlx(t, dbs[1], nil)}
}

func openSqlx(t *testing.T, d testdb.DB, _ engine.Provider) *sqlx.DB {
	return sqlx.NewDb(d.Open(t), d.Driver)
}

func sqlxRepo(t *testing.T, b shardtest.Backend, s ...sharding.Settings) *shardsqlx.Repository {
	t.Helper()
	repo, err := shardsqlx.New(open(t, b.Open(t)), shardtest.CourseRouter(t), shardtest.Registry(t), s...)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(context.Background(), createCourse); err != nil {
		t.Fatal(err)
	}
	return repo
}

var _ shardtest.Repository[sqlx.DB] = (*shardsqlx.Repository)(nil)

// The contract both repositories pass, on every backend.
func TestSqlxContract(t *testing.T) {
	shardtest.Harness[sqlx.DB, course]{
		Open: openSqlx,
		New: func(r *sharding.Router, reg engine.Provider, dbs []*sqlx.DB, s ...sharding.Settings) (shardtest.Repository[sqlx.DB], error) {
			return shardsqlx.New(dbs, r, reg, s...)
		},
		Migrate: func(ctx context.Context, repo shardtest.Repository[sqlx.DB]) error {
			return repo.Exec(ctx, createCourse)
		},
		In: func(ctx context.Context, repo shardtest.Repository[sqlx.DB], key int64, db *sqlx.DB) (shardtest.TxRepository, func(bool) error, error) {
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			in, err := repo.(*shardsqlx.Repository).In(key, tx)
			return in, func(commit bool) error {
				if commit {
					return tx.Commit()
				}
				return tx.Rollback()
			}, err
		},
		Row:    func(name string, user int64) course { return course{Name: name, UserID: user} },
		WithID: func(c course, id int64) course { c.ID = id; return c },
		ID:     func(c *course) int64 { return c.ID },
		User:   func(c *course) int64 { return c.UserID },
		Name:   func(c *course) string { return c.Name },
		Same:   func(got, want course) bool { return got == want },
		Rows: func(ctx context.Context, s sharding.Shard, db *sqlx.DB) ([]course, error) {
			var got []course
			return got, db.SelectContext(ctx, &got, shardsqlx.Query(db, s, "SELECT id, name, user_id FROM {table}"))
		},
		Exec:    func(db *sqlx.DB, query string) error { _, err := db.Exec(query); return err },
		Columns: 3,
	}.Run(t)
}

// Find's and DB's statements on one shard.
func TestSqlxFindAndDB(t *testing.T) {
	ctx := context.Background()
	repo := sqlxRepo(t, shardtest.Backends[0])
	rows := []course{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var got course
	missing := rows[3].ID + 1
	if err := repo.Find(ctx, missing, &got); !errors.Is(err, sql.ErrNoRows) || !errors.Is(err, sharding.ErrNotFound) {
		t.Errorf("Find(missing): err = %v, want sharding.ErrNotFound and sql.ErrNoRows", err)
	}
	db, s, err := repo.DB(rows[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, shardsqlx.Query(db, s, "UPDATE {table} SET name = ? WHERE id = ?"), "renamed", rows[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := repo.Find(ctx, rows[1].ID, &got); err != nil || got.Name != "renamed" {
		t.Errorf("after update in %s: %+v, %v", s, got, err)
	}
}

// A shard's part larger than the batch size is cut into several
// statements, in one transaction, so a failing statement takes the shard's
// earlier ones back with it.
func TestSqlxShardTransaction(t *testing.T) {
	type wide struct {
		ID int64 `db:"id" idgen:"snowflake"`
		A  int64 `db:"a"`
		B  int64 `db:"b"`
		C  int64 `db:"c"`
	}
	ctx := context.Background()
	repo, err := shardsqlx.New(open(t, shardtest.Backends[0].Open(t)), shardtest.CourseRouter(t), shardtest.Registry(t),
		sharding.Settings{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, a BIGINT, b BIGINT, c BIGINT)"); err != nil {
		t.Fatal(err)
	}
	count := func() (total int) {
		t.Helper()
		err := repo.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
			var n int
			err := db.GetContext(ctx, &n, shardsqlx.Query(db, s, "SELECT count(*) FROM {table}"))
			total += n
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	rows := make([]wide, 48) // 12 rows per shard: statements of 5, 5 and 2
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != len(rows) {
		t.Fatalf("%d rows read back, want %d", n, len(rows))
	}
	// The first shard's 12th row repeats its first one's key: its third
	// statement fails and the shard's first ten rows are rolled back.
	again := make([]wide, 48)
	var first []int
	for i := range again {
		again[i].ID = rows[47].ID + 1 + int64(i)
		if s, _ := shardtest.CourseRouter(t).Route(again[i].ID); s.String() == "m0.course_1" {
			first = append(first, i)
		}
	}
	again[first[11]].ID = again[first[0]].ID
	var se *sharding.ShardError
	if err := repo.Create(ctx, again); !errors.As(err, &se) || len(se.Rows) != 12 || !strings.Contains(err.Error(), "statement 3 of 3 (2 rows)") {
		t.Fatalf("Create with a repeated key: err = %v, want a ShardError for 12 rows naming statement 3 of 3", err)
	}
	if n := count(); n != len(rows) {
		t.Errorf("%d rows after the failed Create, want %d: the failed shard was not rolled back", n, len(rows))
	}
}

func TestSqlxErrors(t *testing.T) {
	ctx := context.Background()
	repo := sqlxRepo(t, shardtest.Backends[0])
	type noID struct {
		Key  int64  `db:"key" idgen:"snowflake"`
		Name string `db:"name"`
	}
	if err := repo.Create(ctx, &noID{}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("struct without an id column: err = %v", err)
	}
	type stringID struct {
		ID string `db:"id" idgen:"snowflake,format=radix62"`
	}
	if err := repo.Create(ctx, &stringID{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("string id: err = %v", err)
	}
	type oddColumn struct {
		ID   int64  `db:"id" idgen:"snowflake"`
		Name string `db:"full name"`
	}
	if err := repo.Create(ctx, &oddColumn{}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "full name") {
		t.Errorf("column needing quotes: err = %v", err)
	}
	type unknownKind struct {
		ID int64 `db:"id" idgen:"chain,name=course"`
	}
	if err := repo.Create(ctx, &unknownKind{}); !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Errorf("kind the provider lacks: err = %v", err)
	}
	if err := repo.Create(ctx, course{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("struct by value: err = %v", err)
	}
	first := &course{Name: "before the nil row"}
	for _, v := range []any{[]*course{first, nil}, &[]*course{nil}, (*course)(nil), nil} {
		if err := repo.Create(ctx, v); !errors.Is(err, engine.ErrInvalidData) || errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("nil row in %T: err = %v, want engine.ErrInvalidData", v, err)
		}
	}
	if first.ID != 0 {
		t.Errorf("a batch with a nil row drew ID %d: rows are checked before any ID is drawn", first.ID)
	}
	if err := repo.Find(ctx, 1, course{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Find into a value: err = %v", err)
	}
	if err := repo.Create(ctx, &course{ID: -4}); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("negative pinned ID: err = %v", err)
	}
	for name, zero := range map[string]*shardsqlx.Repository{"zero": {}, "nil": nil} {
		shardtest.Refuses[sqlx.DB, course](t, "a "+name+" Repository", zero, ctx, "make it with New")
		if _, err := zero.In(1, nil); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("In on a %s Repository: err = %v, want engine.ErrInvalidConfig", name, err)
		}
	}
	r := shardtest.CourseRouter(t)
	if _, err := shardsqlx.New([]*sqlx.DB{{}, {}}, r, shardtest.Registry(t)); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("zero sqlx.DB values: err = %v, want engine.ErrInvalidConfig", err)
	}
}

// A nil provider, or a nil *genreg.Registry in the interface, is refused:
// IDs would come from the default registry on machine 0.
func TestSqlxNilProvider(t *testing.T) {
	dbs := open(t, shardtest.Backends[0].Open(t))
	var reg *genreg.Registry
	for name, p := range map[string]engine.Provider{"nil": nil, "typed nil": reg} {
		if _, err := shardsqlx.New(dbs, shardtest.CourseRouter(t), p); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "provider") {
			t.Errorf("%s provider: err = %v, want engine.ErrInvalidConfig naming the provider", name, err)
		}
	}
}

// WithShardKey also takes the column name (the contract gives the Go field
// name).
func TestSqlxShardKeyColumn(t *testing.T) {
	for _, key := range []string{"user_id"} {
		t.Run(key, func(t *testing.T) {
			ctx := context.Background()
			repo := sqlxRepo(t, shardtest.Backends[0], sharding.Settings{ShardKey: key})
			rows := []course{{Name: "a", UserID: 100}, {Name: "b", UserID: 101}, {Name: "c", UserID: 102}}
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			for _, c := range rows {
				var got course
				if err := repo.Find(ctx, c.UserID, &got); err != nil || got != c {
					t.Errorf("Find(user %d) = %+v, %v", c.UserID, got, err)
				}
			}
		})
	}
}

// Embedded structs add their columns; `db:"-"` leaves a field out.
func TestSqlxColumns(t *testing.T) {
	type audit struct {
		By string `db:"created_by"`
	}
	type row struct {
		ID int64 `db:"id" idgen:"snowflake"`
		audit
		Name  string `db:"name"`
		Cache string `db:"-"`
	}
	ctx := context.Background()
	repo, err := shardsqlx.New(open(t, shardtest.Backends[0].Open(t)), shardtest.CourseRouter(t), shardtest.Registry(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name TEXT, created_by TEXT)"); err != nil {
		t.Fatal(err)
	}
	in := row{audit: audit{By: "ada"}, Name: "go", Cache: "not a column"}
	if err := repo.Create(ctx, &in); err != nil {
		t.Fatal(err)
	}
	var out row
	if err := repo.Find(ctx, in.ID, &out); err != nil || out.By != "ada" || out.Name != "go" || out.Cache != "" {
		t.Errorf("Find = %+v, %v", out, err)
	}
}

// An interval router behind the repository: rows land in the month their ID
// was issued in.
func TestSqlxInterval(t *testing.T) {
	ctx := context.Background()
	fc := clocktest.NewFake(shardtest.Start.AddDate(0, -10, 0)) // 2026-01-21
	g, err := snowflake.New(2, snowflake.Settings{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	reg := genreg.New()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	d := testdb.SQLite(t)
	router := shardtest.MonthRouter(t, fc)
	repo, err := shardsqlx.New([]*sqlx.DB{sqlx.NewDb(d.Open(t), d.Driver)}, router, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, createCourse); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if err := repo.Create(ctx, &course{Name: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		fc.Advance(24 * 24 * 3600e9) // 24 days
	}
	months := map[string]int{}
	seen := map[int64]bool{}
	err = repo.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
		var ids []int64
		if err := db.SelectContext(ctx, &ids, shardsqlx.Query(db, s, "SELECT id FROM {table}")); err != nil {
			return err
		}
		shardtest.Placed(t, router, s, ids, seen)
		if len(ids) > 0 {
			months[s.TableName] = len(ids)
		}
		return nil
	})
	if err != nil || len(seen) != 12 || months["course_202601"] != 1 || months["course_202602"] != 1 {
		t.Errorf("rows per month = %v, %v", months, err)
	}
}

// countingProvider hands out kind "snowflake" IDs from one counter per
// generator name, which holds the next ID: a plain sequence. Its draws are
// what the counters moved by.
type countingProvider map[string]*atomic.Int64

func (p countingProvider) Generator(_ context.Context, kind, name string) (engine.Generator, error) {
	next, ok := p[name]
	if kind != "snowflake" || !ok {
		return nil, fmt.Errorf("%w: %s %q", engine.ErrUnknownGenerator, kind, name)
	}
	return testreg.Func(func(context.Context) (int64, error) { return next.Add(1) - 1, nil }), nil
}

// A Create fills every row once, before routing it, and inserts it as
// filled: one draw per zero field, and a key the caller set is kept. The
// refs count from 0, so the first row's Ref is 0, which a second fill of
// the shard's rows would take for unset and draw again.
func TestSqlxCreateFillsOnce(t *testing.T) {
	type ticket struct {
		ID  int64 `db:"id" idgen:"snowflake"`
		Ref int64 `db:"ref" idgen:"snowflake,name=ref"`
	}
	ctx := context.Background()
	keys, refs := new(atomic.Int64), new(atomic.Int64)
	keys.Store(1)
	repo, err := shardsqlx.New(open(t, shardtest.Backends[0].Open(t)), shardtest.CourseRouter(t), countingProvider{"": keys, "ref": refs})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, ref BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	rows := []ticket{{ID: 40}, {}, {}, {}}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	want := []ticket{{40, 0}, {1, 1}, {2, 2}, {3, 3}}
	if !slices.Equal(rows, want) || keys.Load()-1 != 3 || refs.Load() != 4 {
		t.Errorf("rows %v after %d key and %d ref draws; want %v after 3 and 4", rows, keys.Load()-1, refs.Load(), want)
	}
	var stored []ticket
	err = repo.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
		var got []ticket
		err := db.SelectContext(ctx, &got, shardsqlx.Query(db, s, "SELECT id, ref FROM {table}"))
		stored = append(stored, got...)
		return err
	})
	slices.SortFunc(stored, func(a, b ticket) int { return cmp.Compare(a.ID, b.ID) })
	if byID := []ticket{want[1], want[2], want[3], want[0]}; err != nil || !slices.Equal(stored, byID) {
		t.Errorf("stored %v, %v; want %v", stored, err, byID)
	}
}

type lecture struct {
	ID   int64  `db:"id" idgen:"chain,name=lecture"`
	Name string `db:"name"`
}

type invoice struct {
	ID     int64 `db:"id" idgen:"snowflake"`
	Number int64 `db:"number" idgen:"segment,name=invoice"`
}

// A store that forgot the lecture sequence restarts it above every shard.
func TestSqlxFloors(t *testing.T) {
	shardtest.FloorHarness[sqlx.DB]{
		Open: func(t *testing.T, d testdb.DB, _ engine.Provider) *sqlx.DB { return sqlx.NewDb(d.Open(t), d.Driver) },
		New: func(t *testing.T, r *sharding.Router, dbs []*sqlx.DB, reg engine.Provider) shardtest.Repository[sqlx.DB] {
			repo, err := shardsqlx.New(dbs, r, reg)
			if err != nil {
				t.Fatal(err)
			}
			return repo
		},
		Exec: func(db *sqlx.DB, query string) error { _, err := db.Exec(query); return err },
		IDs: func(db *sqlx.DB, query string) ([]int64, error) {
			var ids []int64
			return ids, db.Select(&ids, query)
		},
		Lectures: func(ctx context.Context, repo shardtest.Repository[sqlx.DB], n int) ([]int64, error) {
			rows := make([]lecture, n)
			for i := range rows {
				rows[i].Name = fmt.Sprint("lecture ", i)
			}
			err := repo.Create(ctx, rows)
			ids := make([]int64, n)
			for i, l := range rows {
				ids[i] = l.ID
			}
			return ids, err
		},
		Invoice: func(ctx context.Context, repo shardtest.Repository[sqlx.DB]) (int64, error) {
			var in invoice
			err := repo.Create(ctx, &in)
			return in.Number, err
		},
	}.Run(t)
}

// Rows are skipped as stored by their "id" column only: a struct without
// one, routed by a key many rows share, has every row inserted.
func TestSqlxNoSkipWithoutID(t *testing.T) {
	type visit struct {
		Code   int64 `db:"code" idgen:"snowflake"`
		UserID int64 `db:"user_id"`
	}
	ctx := context.Background()
	repo, err := shardsqlx.New(open(t, shardtest.Backends[0].Open(t)), shardtest.CourseRouter(t), shardtest.Registry(t),
		sharding.Settings{ShardKey: "user_id"})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, "CREATE TABLE {table} (code BIGINT PRIMARY KEY, user_id BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := repo.Create(ctx, &visit{UserID: 5}); err != nil {
			t.Fatal(err)
		}
	}
	db, s, err := repo.DB(5)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.GetContext(ctx, &n, shardsqlx.Query(db, s, "SELECT COUNT(*) FROM {table} WHERE user_id = ?"), 5); err != nil || n != 2 {
		t.Errorf("%d visits of user 5 stored, %v; want 2", n, err)
	}
}

// Columns named by a keyword and in upper case work in every verb: the
// repository quotes every column it writes.
func TestSqlxQuotedColumns(t *testing.T) {
	type task struct {
		ID    int64  `db:"id" idgen:"snowflake"`
		Order int64  `db:"order"`
		Group string `db:"Group"`
	}
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			q := func(name string) string { return repo.Quote(shardtest.Dialect(b), name) }
			repo, err := shardsqlx.New(open(t, b.Open(t)), shardtest.CourseRouter(t), shardtest.Registry(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, "+q("order")+" BIGINT NOT NULL, "+q("Group")+" VARCHAR(16) NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			rows := make([]task, 8)
			for i := range rows {
				rows[i] = task{Order: int64(i), Group: "g"}
			}
			for range 2 { // the second reads back which rows are stored
				if err := repo.Create(ctx, rows); err != nil {
					t.Fatal(err)
				}
			}
			var got task
			if err := repo.Find(ctx, rows[3].ID, &got); err != nil || got != rows[3] {
				t.Errorf("Find = %+v, %v; want %+v", got, err, rows[3])
			}
			var many []task
			if err := repo.Get(ctx, []int64{rows[1].ID, rows[6].ID}, &many); err != nil || len(many) != 2 {
				t.Errorf("Get = %+v, %v", many, err)
			}
			if err := repo.Page(ctx, sharding.Query{Order: "order DESC", Limit: 3}, &many); err != nil || len(many) != 3 || many[0].Order != 7 {
				t.Errorf("Page by order = %+v, %v", many, err)
			}
			if n, err := repo.Update(ctx, sharding.Query{IDs: []int64{rows[2].ID}}, &task{}, map[string]any{"order": 20, "Group": "h"}); err != nil || n != 1 {
				t.Errorf("Update = %d, %v", n, err)
			}
			if n, err := repo.Count(ctx, sharding.Query{Where: q("Group") + " = ?", Args: []any{"h"}}, &task{}); err != nil || n != 1 {
				t.Errorf("Count = %d, %v", n, err)
			}
			if n, err := repo.Delete(ctx, sharding.Query{IDs: []int64{rows[2].ID}}, &task{}); err != nil || n != 1 {
				t.Errorf("Delete = %d, %v", n, err)
			}
		})
	}
}

// ForEach of a repository inside a transaction is refused: its fn would
// get the pool and run outside the transaction.
func TestSqlxInForEach(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo := sqlxRepo(t, b)
			db, _, err := repo.DB(4)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			in, err := repo.In(4, tx)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			err = in.ForEach(ctx, func(sharding.Shard, *sqlx.DB) error { ran = true; return nil })
			if !errors.Is(err, engine.ErrInvalidConfig) || ran {
				t.Errorf("ForEach inside a transaction: err = %v, fn ran: %v; want engine.ErrInvalidConfig, fn not run", err, ran)
			}
		})
	}
}

// In takes a transaction on the right PostgreSQL database however it was
// reached: over TCP or the server's Unix socket; two schemas of one
// database (search_path) are two databases.
func TestSqlxPostgresIdentity(t *testing.T) {
	ctx := context.Background()
	dbs := shardtest.Backends[2].Open(t)
	socket, ok := shardtest.Socket(t, dbs[0])
	if !ok {
		t.Skip("no PostgreSQL Unix socket")
	}
	repo, err := shardsqlx.New(open(t, dbs), shardtest.CourseRouter(t), shardtest.Registry(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		d    testdb.DB
		want error
	}{"m0 over the socket": {socket, nil}, "m1 over TCP": {dbs[1], sharding.ErrWrongShard}} {
		tx, err := openSqlx(t, c.d, nil).BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := repo.In(4, tx); !errors.Is(err, c.want) { // key 4 → m0
			t.Errorf("In(4) with a transaction of %s: err = %v, want %v", name, err, c.want)
		}
		_ = tx.Rollback()
	}

	admin := openSqlx(t, dbs[0], nil)
	schemas := make([]*sqlx.DB, 2)
	for i, name := range []string{"m0", "m1"} {
		if _, err := admin.Exec("CREATE SCHEMA " + name); err != nil {
			t.Fatal(err)
		}
		d := dbs[0]
		d.DSN += "&search_path=" + name
		schemas[i] = openSqlx(t, d, nil)
	}
	two, err := shardsqlx.New(schemas, shardtest.CourseRouter(t), shardtest.Registry(t))
	if err != nil {
		t.Fatalf("two schemas of one database: %v", err)
	}
	if err := two.Exec(ctx, createCourse); err != nil {
		t.Fatal(err)
	}
	rows := []course{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	if err := two.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := admin.Get(&n, "SELECT count(*) FROM m0.course_1"); err != nil || n != 1 {
		t.Errorf("m0.course_1 holds %d rows, %v; want 1", n, err)
	}
}
