package sqlhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
	"github.com/idforge/idforge/tests/testreg"
)

// newRegistry is the shared test registry: snowflake, and a counter per chain name.
func newRegistry(t testing.TB) *genreg.Registry { return testreg.New(t) }

// Row has one key of every supported kind.
type Row struct {
	ID   int64     `db:"id" idgen:"snowflake"`
	U    uint64    `db:"u" idgen:"chain,name=u"`
	E    engine.ID `db:"e" idgen:"snowflake"`
	Code string    `db:"code" idgen:"snowflake,format=radix62"`
	Name string    `db:"name"`
}

const insertRow = `INSERT INTO rows_t (id, u, e, code, name) VALUES (:id, :u, :e, :code, :name)`

func createTable(t *testing.T, d testdb.DB, db *sqlx.DB) {
	t.Helper()
	// Radix 62 tells upper from lower case: MySQL/MariaDB need a binary column.
	code, unsigned := "VARCHAR(16)", "BIGINT"
	if d.Name == "mariadb" {
		code, unsigned = "VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin", "BIGINT UNSIGNED"
	}
	ddl := fmt.Sprintf(`CREATE TABLE rows_t (
		id BIGINT PRIMARY KEY, u %s NOT NULL UNIQUE, e BIGINT NOT NULL UNIQUE,
		code %s NOT NULL UNIQUE, name VARCHAR(64) NOT NULL)`, unsigned, code)
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
}

func openAll(t *testing.T) []struct {
	testdb.DB
	x *sqlx.DB
} {
	var out []struct {
		testdb.DB
		x *sqlx.DB
	}
	for _, d := range testdb.All(t) {
		db := sqlx.NewDb(d.Open(t), d.Driver)
		if d.Name == "sqlite" {
			db.SetMaxOpenConns(1)
		}
		createTable(t, d, db)
		out = append(out, struct {
			testdb.DB
			x *sqlx.DB
		}{d, db})
	}
	return out
}

// checkTable reads rows_t back and compares it with want, keyed by id.
func checkTable(t *testing.T, db *sqlx.DB, want map[int64]Row) {
	t.Helper()
	var got []Row
	if err := db.Select(&got, "SELECT id, u, e, code, name FROM rows_t"); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows in the table, want %d", len(got), len(want))
	}
	for _, r := range got {
		if w, ok := want[r.ID]; !ok || w != r {
			t.Fatalf("row %+v, inserted %+v", r, w)
		}
	}
}

// generated checks that every key of r was drawn: snowflake IDs and radix-62
// codes are positive, chain IDs start past the counter's base.
func generated(t *testing.T, r *Row) {
	t.Helper()
	r62, err := convert.New("radix62", convert.Settings{Padded: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r62.Parse(r.Code); err != nil || n <= 0 || r.ID <= 0 || r.U <= 1_000_000 || r.E <= 0 {
		t.Fatalf("row %+v does not hold generated IDs (%v)", r, err)
	}
}

func TestInsertOnAllDatabases(t *testing.T) {
	ctx := context.Background()
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			ids := sqlhook.New(newRegistry(t))
			db := d.x
			want := map[int64]Row{}
			keep := func(rs ...*Row) {
				for _, r := range rs {
					if r.Name != "pinned" {
						generated(t, r)
					}
					if _, dup := want[r.ID]; dup {
						t.Fatalf("id %d twice", r.ID)
					}
					want[r.ID] = *r
				}
			}

			one := Row{Name: "one"}
			if _, err := ids.Insert(ctx, db, insertRow, &one); err != nil {
				t.Fatal(err)
			}
			keep(&one)

			pinned := Row{ID: 42, U: 42, E: 42, Code: "pinned", Name: "pinned"}
			if _, err := ids.Insert(ctx, db, insertRow, &pinned); err != nil {
				t.Fatal(err)
			}
			if pinned.ID != 42 || pinned.U != 42 || pinned.E != 42 || pinned.Code != "pinned" {
				t.Fatalf("pinned IDs replaced: %+v", pinned)
			}
			keep(&pinned)

			// Bulk named insert of a slice of pointers in one statement.
			ptrs := []*Row{{Name: "p0"}, {Name: "p1"}, {Name: "p2"}}
			if _, err := ids.Insert(ctx, db, insertRow, ptrs); err != nil {
				t.Fatal(err)
			}
			keep(ptrs...)

			// 2,500 rows in chunks of 1,000; 1,200 in the default chunks (1,000);
			// 14,000 (70,000 placeholders, past every server's limit) in one
			// chunk, which must be split under the placeholder limit. SQLite is spared
			// the last: its driver binds huge statements slowly (40 s under -race).
			cases := []struct{ rows, batch int }{{2500, 1000}, {1200, 0}, {14000, 14000}}
			if d.Name == "sqlite" {
				cases = cases[:2]
			}
			for _, c := range cases {
				batch := make([]Row, c.rows)
				for i := range batch {
					batch[i].Name = fmt.Sprintf("b%d-%d", c.rows, i)
				}
				n, err := ids.InsertBatch(ctx, db, insertRow, batch, c.batch)
				if err != nil || n != int64(c.rows) {
					t.Fatalf("InsertBatch(%d, %d) = %d, %v", c.rows, c.batch, n, err)
				}
				for i := range batch {
					keep(&batch[i])
				}
			}
			arr := [2]Row{{Name: "a0"}, {Name: "a1"}}
			if n, err := ids.InsertBatch(ctx, db, insertRow, &arr, 0); err != nil || n != 2 {
				t.Fatalf("InsertBatch(&array) = %d, %v", n, err)
			}
			keep(&arr[0], &arr[1])

			// A map is passed through as it is.
			m := map[string]any{"id": int64(41), "u": uint64(1) << 50, "e": 7, "code": "map", "name": "map"}
			if _, err := ids.Insert(ctx, db, insertRow, m); err != nil {
				t.Fatal(err)
			}
			want[41] = Row{ID: 41, U: 1 << 50, E: 7, Code: "map", Name: "map"}

			checkTable(t, db, want)
		})
	}
}

type Typo struct {
	ID int64 `db:"id" idgen:"snowflake,fromat=radix62"`
}

type WrongType struct {
	ID int32 `db:"id" idgen:"snowflake"`
}

type KeyTypo struct {
	ID int64 `db:"id" idgn:"snowflake"`
}

type UnknownKind struct {
	ID int64 `db:"id" idgen:"chian"`
}

func TestFillErrors(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ids := sqlhook.New(reg)
	cases := []struct {
		v    any
		is   error
		says string
	}{
		{&Typo{}, engine.ErrInvalidConfig, "model Typo field ID: tag `idgen:\"snowflake,fromat=radix62\"`: unknown option \"fromat\""},
		{&[]WrongType{{}}, engine.ErrInvalidConfig, "model WrongType field ID: type int32 cannot hold"},
		{[]*UnknownKind{{}}, engine.ErrUnknownGenerator, `model UnknownKind field ID: tag`},
		{&KeyTypo{}, engine.ErrInvalidConfig, `model KeyTypo field ID: tag key "idgn" looks like a misspelt "idgen"`},
		{Row{}, engine.ErrInvalidConfig, "pass a pointer"},
		{[2]Row{}, engine.ErrInvalidConfig, "pass a pointer"},
		{(*Row)(nil), engine.ErrInvalidData, "nil *sqlhook_test.Row"},
		{[]*Row{{}, nil}, engine.ErrInvalidData, "element 1 of []*sqlhook_test.Row is nil"},
		{map[string]any{}, engine.ErrInvalidConfig, "cannot fill"},
		{&[]int64{1}, engine.ErrInvalidConfig, "cannot fill"},
		{nil, engine.ErrInvalidData, "nil value"},
	}
	for _, c := range cases {
		for attempt := range 2 {
			err := ids.Fill(ctx, c.v)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Fill(%T) attempt %d: %v; want %v saying %q", c.v, attempt, err, c.is, c.says)
			}
		}
	}
	// A kind registered after the first failure is picked up.
	if err := reg.Register("chian", "", testreg.Func(func(context.Context) (int64, error) { return 9, nil })); err != nil {
		t.Fatal(err)
	}
	u := UnknownKind{}
	if err := ids.Fill(ctx, &u); err != nil || u.ID != 9 {
		t.Errorf("after registering the kind: %+v, %v", u, err)
	}
}

// InsertBatch refuses what is not a batch before drawing an ID: one row
// (Insert's job), a pointer to a pointer, a nil.
func TestInsertBatchWantsRows(t *testing.T) {
	ctx := context.Background()
	d := testdb.SQLite(t)
	db := sqlx.NewDb(d.Open(t), d.Driver)
	createTable(t, d, db)
	ids := sqlhook.New(newRegistry(t))
	one := &Row{Name: "one"}
	for _, c := range []struct {
		v  any
		is error
	}{{one, engine.ErrInvalidConfig}, {&one, engine.ErrInvalidConfig}, {nil, engine.ErrInvalidData}, {(*[]Row)(nil), engine.ErrInvalidData}} {
		if n, err := ids.InsertBatch(ctx, db, insertRow, c.v, 0); !errors.Is(err, c.is) || n != 0 {
			t.Errorf("InsertBatch(%T) = %d, %v; want %v", c.v, n, err, c.is)
		}
	}
	if one.ID != 0 {
		t.Errorf("a refused InsertBatch drew ID %d", one.ID)
	}
}

func TestFillKeepsSetValues(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ids := sqlhook.New(reg)
	rows := []Row{{ID: 5, Code: "x"}, {}}
	if err := ids.Fill(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if rows[0].ID != 5 || rows[0].Code != "x" || rows[0].U == 0 || rows[0].E == 0 {
		t.Errorf("partly set row: %+v", rows[0])
	}
	generated(t, &rows[1])
}

// 8 goroutines each insert 5,000 rows through one *sqlx.DB: 100 single
// inserts, the rest in batches of 50.
func TestConcurrentInsertsOnAllDatabases(t *testing.T) {
	const workers, perWorker, chunk = 8, 5000, 50
	ctx := context.Background()
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			ids := sqlhook.New(newRegistry(t))
			rows := make([][]Row, workers)
			errs := make([]error, workers)
			var start, wg sync.WaitGroup
			start.Add(1)
			for w := range workers {
				rows[w] = make([]Row, perWorker)
				for i := range rows[w] {
					rows[w][i].Name = fmt.Sprintf("w%d-%d", w, i)
				}
				wg.Go(func() {
					start.Wait()
					mine := rows[w]
					for i := range 100 {
						if _, err := ids.Insert(ctx, d.x, insertRow, &mine[i]); err != nil {
							errs[w] = err
							return
						}
					}
					if _, err := ids.InsertBatch(ctx, d.x, insertRow, mine[100:], chunk); err != nil {
						errs[w] = err
					}
				})
			}
			start.Done()
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			want := map[int64]Row{}
			codes := map[string]bool{}
			for _, rs := range rows {
				for _, r := range rs {
					generated(t, &r)
					if _, dup := want[r.ID]; dup || codes[r.Code] {
						t.Fatalf("id %d or code %s given twice", r.ID, r.Code)
					}
					want[r.ID], codes[r.Code] = r, true
				}
			}
			checkTable(t, d.x, want)
		})
	}
}

type SnowflakeOnly struct {
	ID int64 `db:"id" idgen:"snowflake"`
}

// TestDefaultRegistry is the only test here that uses idforge.Default(),
// which reads IDFORGE_MACHINE_ID once per process.
func TestDefaultRegistry(t *testing.T) {
	t.Setenv("IDFORGE_MACHINE_ID", "5")
	// No state file, so no lock file: the test binaries of other packages
	// run at once on this machine ID too, and the registry outlives the test.
	t.Setenv("IDFORGE_STATE_DIR", "off")
	ctx, def := context.Background(), sqlhook.New(nil)
	var r SnowflakeOnly
	if err := def.Fill(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if _, machine, _, err := snowflake.Default.Decode(r.ID); err != nil || machine != 5 || r.ID == 0 {
		t.Fatalf("id %d from the default registry: machine %d, %v", r.ID, machine, err)
	}
	// Chains need a registry built with a store: the error says so.
	const hint = `kind "chain" needs a registry built with a store`
	if err := def.Fill(ctx, &Row{}); !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), "model Row field U") {
		t.Fatalf("kind chain is not in the default registry: %v", err)
	}
	// A typed nil registry is no registry, not a panic.
	if err := sqlhook.New((*genreg.Registry)(nil)).Fill(ctx, &SnowflakeOnly{}); err != nil {
		t.Fatalf("typed nil registry: %v", err)
	}

	// The same on every database: rows inserted with the default registry,
	// with the machine ID the environment gives.
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			if _, err := d.x.Exec(`CREATE TABLE snow (id BIGINT PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			rows := []SnowflakeOnly{{}, {}}
			if n, err := def.InsertBatch(ctx, d.x, `INSERT INTO snow (id) VALUES (:id)`, rows, 0); err != nil || n != 2 {
				t.Fatalf("InsertBatch: %d, %v", n, err)
			}
			var n int
			if err := d.x.Get(&n, `SELECT count(*) FROM snow`); err != nil || n != 2 {
				t.Fatalf("%d rows, %v", n, err)
			}
		})
	}
}
