package sqlhook_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
)

// TestInsert: LastInsertId is the key the marker put in the table, and the
// marker reports it, on every driver; one draw per execution.
func TestInsert(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			reg := newCounting(t)
			db := tg.open(t, reg, "orders")
			ins := tg.d.Rebind("INSERT INTO orders (id, name) VALUES (?, ?)")

			n := sqlhook.Next("snowflake", "")
			res := mustExec(t, db, ins, n, "ada")
			if got, want := lastID(t, res), keyOf(t, db, tg.d, "orders", "ada"); got != want || n.ID() != want {
				t.Errorf("LastInsertId %d, marker %d, key in the table %d", got, n.ID(), want)
			}
			if rows, err := res.RowsAffected(); err != nil || rows != 1 {
				t.Errorf("RowsAffected = %d, %v; want 1", rows, err)
			}
			if got := reg.draws.Load(); got != 1 {
				t.Errorf("%d draws for one execution; want 1", got)
			}

			// The same marker again: a new ID for the new execution.
			first := n.ID()
			res = mustExec(t, db, ins, n, "bob")
			if got, want := lastID(t, res), keyOf(t, db, tg.d, "orders", "bob"); got != want || n.ID() != want || want == first {
				t.Errorf("second run: LastInsertId %d, marker %d, key %d, first key %d", got, n.ID(), want, first)
			}
			if got := reg.draws.Load(); got != 2 {
				t.Errorf("%d draws for two executions; want 2", got)
			}
		})
	}
}

// TestTwoMarkers: a statement with two markers fills two different keys,
// each marker reporting its own, and LastInsertId is the first's.
func TestTwoMarkers(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			reg := newCounting(t)
			db := tg.open(t, reg, "pairs")
			a, b := sqlhook.Next("snowflake", ""), sqlhook.Next("chain", "pair")
			res := mustExec(t, db, tg.d.Rebind("INSERT INTO pairs (id, name) VALUES (?, ?), (?, ?)"), a, "a", b, "b")
			ka, kb := keyOf(t, db, tg.d, "pairs", "a"), keyOf(t, db, tg.d, "pairs", "b")
			if a.ID() != ka || b.ID() != kb || ka == kb {
				t.Errorf("markers report %d and %d; keys %d and %d", a.ID(), b.ID(), ka, kb)
			}
			if got := lastID(t, res); got != ka {
				t.Errorf("LastInsertId %d; want the first marker's %d", got, ka)
			}
			if rows, _ := res.RowsAffected(); rows != 2 {
				t.Errorf("RowsAffected = %d; want 2", rows)
			}
			if got := reg.draws.Load(); got != 2 {
				t.Errorf("%d draws; want 2", got)
			}

			// One marker in two places is one ID.
			c := sqlhook.Next("snowflake", "")
			var x, y int64
			q := fmt.Sprintf("SELECT CAST(? AS %[1]s), CAST(? AS %[1]s)", bigint(tg))
			if err := db.QueryRow(tg.d.Rebind(q), c, c).Scan(&x, &y); err != nil || x != y || x != c.ID() || x == 0 {
				t.Errorf("one marker twice in a query: %d and %d, marker %d, %v", x, y, c.ID(), err)
			}
		})
	}
}

// TestPreparedAndTx: a prepared statement draws for every execution, in and
// out of a transaction, and so does a statement in a transaction.
func TestPreparedAndTx(t *testing.T) {
	ctx := context.Background()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			reg := newCounting(t)
			db := tg.open(t, reg, "items")
			ins := tg.d.Rebind("INSERT INTO items (id, name) VALUES (?, ?)")
			st, err := db.PrepareContext(ctx, ins)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			n := sqlhook.Next("snowflake", "")
			seen := map[int64]bool{}
			check := func(res sql.Result, q interface {
				QueryRow(string, ...any) *sql.Row
			}, name string) {
				t.Helper()
				got, want := lastID(t, res), keyOf(t, q, tg.d, "items", name)
				if got != want || n.ID() != want || seen[want] {
					t.Errorf("%s: LastInsertId %d, marker %d, key %d (seen before: %v)", name, got, n.ID(), want, seen[want])
				}
				seen[want] = true
			}
			for i := range 3 {
				name := fmt.Sprint("stmt", i)
				res, err := st.ExecContext(ctx, n, name)
				if err != nil {
					t.Fatal(err)
				}
				check(res, db, name)
			}

			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback() // after a failure: the next target shares the database
			res, err := tx.ExecContext(ctx, ins, n, "tx")
			if err != nil {
				t.Fatal(err)
			}
			check(res, tx, "tx")
			txst := tx.StmtContext(ctx, st)
			for i := range 2 {
				name := fmt.Sprint("txstmt", i)
				res, err := txst.ExecContext(ctx, n, name)
				if err != nil {
					t.Fatal(err)
				}
				check(res, tx, name)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"tx", "txstmt0", "txstmt1"} {
				keyOf(t, db, tg.d, "items", name) // committed
			}
			if got := reg.draws.Load(); got != 6 {
				t.Errorf("%d draws for 6 executions; want 6", got)
			}
		})
	}
}

// TestQuery: markers work in queries too (INSERT ... RETURNING, SELECT),
// one draw per execution.
func TestQuery(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			reg := newCounting(t)
			db := tg.open(t, reg, "q")
			n := sqlhook.Next("snowflake", "")
			var got int64
			if err := db.QueryRow(tg.d.Rebind("SELECT CAST(? AS "+bigint(tg)+")"), n).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got == 0 || got != n.ID() {
				t.Errorf("SELECT gave %d; marker %d", got, n.ID())
			}
			if tg.d.Name == "mariadb" {
				return // RETURNING on INSERT: MariaDB 10.5+, not every MySQL
			}
			if err := db.QueryRow(tg.d.Rebind("INSERT INTO q (id, name) VALUES (?, ?) RETURNING id"), n, "r").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if key := keyOf(t, db, tg.d, "q", "r"); got != key || n.ID() != key {
				t.Errorf("RETURNING %d, marker %d, key %d", got, n.ID(), key)
			}
		})
	}
}

// TestNoMarker: statements without a marker get the base driver's result,
// auto-increment keys included.
func TestNoMarker(t *testing.T) {
	for _, tg := range targets(t) {
		if tg.d.Name == "postgres" {
			continue // pgx has no LastInsertId
		}
		t.Run(tg.name, func(t *testing.T) {
			db := tg.open(t, newCounting(t), "plain")
			auto := "id INTEGER PRIMARY KEY AUTOINCREMENT"
			if tg.d.Name != "sqlite" {
				auto = "id BIGINT AUTO_INCREMENT PRIMARY KEY"
			}
			mustExec(t, db, "DROP TABLE IF EXISTS auto_rows")
			mustExec(t, db, "CREATE TABLE auto_rows ("+auto+", name VARCHAR(40) NOT NULL)")
			mustExec(t, db, tg.d.Rebind("INSERT INTO auto_rows (id, name) VALUES (?, ?)"), 41, "pinned")
			res := mustExec(t, db, tg.d.Rebind("INSERT INTO auto_rows (name) VALUES (?)"), "next")
			if got := lastID(t, res); got != 42 {
				t.Errorf("LastInsertId %d; want the driver's 42", got)
			}
		})
	}
}

// TestWithoutPlugin: a marker through a database opened without the plugin
// fails the statement with ErrNotHooked, and inserts nothing.
func TestWithoutPlugin(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			hooked := tg.open(t, newCounting(t), "bare")
			db, err := sql.Open(tg.d.Driver, tg.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = db.Exec(tg.d.Rebind("INSERT INTO bare (id, name) VALUES (?, ?)"), sqlhook.Next("snowflake", ""), "x")
			if !errors.Is(err, sqlhook.ErrNotHooked) || !strings.Contains(err.Error(), "sqlhook.Open") {
				t.Errorf("Exec without the plugin: %v; want ErrNotHooked saying to open through sqlhook", err)
			}
			var n int
			if err := hooked.QueryRow("SELECT COUNT(*) FROM bare").Scan(&n); err != nil || n != 0 {
				t.Errorf("%d rows, %v; want none", n, err)
			}
		})
	}
}

// TestDrawErrors: a kind the registry lacks fails the statement with the
// registry's error; IDs drawn before it are kept for the next execution.
func TestDrawErrors(t *testing.T) {
	d := testdb.SQLite(t)
	reg := newCounting(t)
	tg := target{d.Name, d, d.DSN}
	db := tg.open(t, reg, "errs")
	a := sqlhook.Next("snowflake", "")
	_, err := db.Exec("INSERT INTO errs (id, name) VALUES (?, ?), (?, 'b')", a, "a", sqlhook.Next("nope", ""))
	if !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), `sqlhook.Next("nope", "")`) {
		t.Errorf("unknown kind: %v", err)
	}
	kept := a.ID()
	res := mustExec(t, db, "INSERT INTO errs (id, name) VALUES (?, ?)", a, "a")
	if got := lastID(t, res); got != kept || reg.draws.Load() != 1 {
		t.Errorf("after a failed draw: key %d, kept %d, %d draws; want the kept ID and 1 draw", got, kept, reg.draws.Load())
	}

	_, err = db.Exec("INSERT INTO errs (id, name) VALUES (?, 'c')", (*sqlhook.Marker)(nil))
	if !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil marker: %v", err)
	}

	// Chains need a registry with a store; the default has none.
	noChain := genreg.New()
	db2, err := sqlhook.Open(d.Driver, d.DSN, sqlhook.Settings{Registry: noChain})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	_, err = db2.Exec("SELECT ?", sqlhook.Next("chain", "order"))
	if !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), "Settings.Registry") {
		t.Errorf("chain without a store: %v", err)
	}
}

// TestOpenDefaultRegistry: Settings{} draws from idforge.Default(), which
// reads IDFORGE_MACHINE_ID once per process: the same machine ID as the
// helpers' TestDefaultRegistry, whichever runs first.
func TestOpenDefaultRegistry(t *testing.T) {
	t.Setenv("IDFORGE_MACHINE_ID", "5")
	// No state file, so no lock file: the test binaries of other packages
	// run at once on this machine ID too, and the registry outlives the test.
	t.Setenv("IDFORGE_STATE_DIR", "off")
	d := testdb.SQLite(t)
	db, err := sqlhook.Open(d.Driver, d.DSN, sqlhook.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := sqlhook.Next("snowflake", "")
	var got int64
	if err := db.QueryRow("SELECT ?", n).Scan(&got); err != nil || got == 0 || got != n.ID() {
		t.Errorf("default registry: %d, %v; marker %d", got, err, n.ID())
	}
	if _, machine, _, err := snowflake.Default.Decode(got); err != nil || machine != 5 {
		t.Errorf("ID %d: machine %d, %v; want machine 5, from idforge.Default()", got, machine, err)
	}
}

// TestOpenErrors: Open reports what sql.Open would.
func TestOpenErrors(t *testing.T) {
	if _, err := sqlhook.Open("no-such-driver", "", sqlhook.Settings{}); err == nil {
		t.Error("Open of an unknown driver: no error")
	}
	if _, err := sqlhook.Open("mysql", "not a DSN", sqlhook.Settings{}); err == nil {
		t.Error("Open with a DSN the MySQL driver cannot parse: no error")
	}
}
