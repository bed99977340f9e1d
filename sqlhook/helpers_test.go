package sqlhook_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
	"github.com/idforge/idforge/tests/testreg"
)

// counting is a registry that counts the IDs drawn from it.
type counting struct {
	engine.Provider
	draws atomic.Int64
}

func newCounting(t testing.TB) *counting { return &counting{Provider: testreg.New(t)} }

func (c *counting) Generator(ctx context.Context, kind, name string) (engine.Generator, error) {
	g, err := c.Provider.Generator(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	return testreg.Func(func(ctx context.Context) (int64, error) {
		c.draws.Add(1)
		return g.NextID(ctx)
	}), nil
}

// target is one database the tests run on, opened through the plugin.
type target struct {
	name string
	d    testdb.DB
	dsn  string
}

// targets are SQLite, MariaDB without and with interpolateParams (the
// first answers Exec with driver.ErrSkip, so database/sql prepares every
// statement) and PostgreSQL through pgx; missing servers are left out
// unless IDFORGE_REQUIRE_SERVERS=1.
func targets(t *testing.T) []target {
	t.Helper()
	var out []target
	for _, d := range testdb.All(t) {
		out = append(out, target{d.Name, d, d.DSN})
		if d.Name == "mariadb" {
			cfg, err := mysql.ParseDSN(d.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.InterpolateParams = true
			out = append(out, target{"mariadb-interpolate", d, cfg.FormatDSN()})
		}
	}
	return out
}

// open opens tg through the plugin, drawing from reg, and creates table
// (id BIGINT PRIMARY KEY, name) anew.
func (tg target) open(t *testing.T, reg engine.Provider, table string) *sql.DB {
	t.Helper()
	db, err := sqlhook.Open(tg.d.Driver, tg.dsn, sqlhook.Settings{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustExec(t, db, "DROP TABLE IF EXISTS "+table)
	mustExec(t, db, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL)")
	return db
}

func mustExec(t testing.TB, db interface {
	Exec(string, ...any) (sql.Result, error)
}, q string, args ...any) sql.Result {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

// lastID is res.LastInsertId, failing the test on an error.
func lastID(t testing.TB, res sql.Result) int64 {
	t.Helper()
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatalf("LastInsertId: %v", err)
	}
	return id
}

// keyOf returns the key of the row called name.
func keyOf(t testing.TB, db interface {
	QueryRow(string, ...any) *sql.Row
}, d testdb.DB, table, name string) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow(d.Rebind("SELECT id FROM "+table+" WHERE name = ?"), name).Scan(&id); err != nil {
		t.Fatalf("key of %q: %v", name, err)
	}
	return id
}

// bigint is the type to CAST a parameter to for an integer result.
func bigint(tg target) string {
	if tg.d.Name == "mariadb" {
		return "SIGNED"
	}
	return "BIGINT"
}
