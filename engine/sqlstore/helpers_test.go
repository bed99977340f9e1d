package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// forEachDB runs f against a fresh SQLite file, MariaDB and PostgreSQL
// database, each with the ID tables created, the three in parallel (the
// time goes into waiting for commits, not CPU).
func forEachDB(t *testing.T, f func(t *testing.T, d testdb.DB)) {
	t.Helper()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			storeOn(t, d.Open(t), sqlstore.Settings{CreateTables: true})
			f(t, d)
		})
	}
}

// openStore opens a new pool on d and a Store on it, both closed when the
// test ends.
func openStore(t testing.TB, d testdb.DB, s ...sqlstore.Settings) *sqlstore.Store {
	t.Helper()
	return storeOn(t, d.Open(t), s...)
}

// storeOn opens a Store on db, closed when the test ends. Test stores wait
// no reset grace (no other process uses their database) and take a
// database they find empty for a brand-new one, unless settings say.
func storeOn(t testing.TB, db *sql.DB, settings ...sqlstore.Settings) *sqlstore.Store {
	t.Helper()
	var set sqlstore.Settings
	if len(settings) > 0 {
		set = settings[0]
	}
	if set.ResetGrace == 0 {
		set.ResetGrace = -1
	}
	set.Init = true
	s, err := sqlstore.Open(context.Background(), db, set)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// counts records what the driver was asked to do. Each statement executed
// is one network round trip with pgx and go-sql-driver/mysql once it is
// prepared on the connection (database/sql keeps the driver statement per
// connection).
type counts struct {
	prepares, statements, begins atomic.Int64
}

// countingDB opens d through a connector that counts prepares, executed
// statements and transactions. The Driver is the real one, so dialect
// detection still works.
func countingDB(t *testing.T, d testdb.DB) (*sql.DB, *counts) {
	t.Helper()
	drv := d.Open(t).Driver()
	var inner driver.Connector = dsnConnector{d.DSN, drv}
	if dc, ok := drv.(driver.DriverContext); ok {
		c, err := dc.OpenConnector(d.DSN)
		if err != nil {
			t.Fatal(err)
		}
		inner = c
	}
	n := &counts{}
	db := sql.OpenDB(countingConnector{inner, n})
	t.Cleanup(func() { db.Close() })
	return db, n
}

type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type countingConnector struct {
	inner driver.Connector
	n     *counts
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{conn, c.n}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.inner.Driver() }

var errNoContext = errors.New("test driver wrapper: the wrapped driver lacks a context method")

type countingConn struct {
	inner driver.Conn
	n     *counts
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.n.prepares.Add(1)
	p, ok := c.inner.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNoContext
	}
	s, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{s, c.n}, nil
}

func (c *countingConn) Close() error { return c.inner.Close() }

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.begins.Add(1)
	b, ok := c.inner.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoContext
	}
	return b.BeginTx(ctx, opts)
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.n.statements.Add(1)
	return e.ExecContext(ctx, query, args)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.n.statements.Add(1)
	return q.QueryContext(ctx, query, args)
}

type countingStmt struct {
	inner driver.Stmt
	n     *counts
}

func (s *countingStmt) Close() error  { return s.inner.Close() }
func (s *countingStmt) NumInput() int { return s.inner.NumInput() }

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errNoContext
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errNoContext
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.inner.(driver.StmtExecContext)
	if !ok {
		return nil, errNoContext
	}
	s.n.statements.Add(1)
	return e.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.inner.(driver.StmtQueryContext)
	if !ok {
		return nil, errNoContext
	}
	s.n.statements.Add(1)
	return q.QueryContext(ctx, args)
}

// delta runs f and returns how many prepares, statements and transactions
// it caused.
func (n *counts) delta(f func()) (prepares, statements, begins int64) {
	p, s, b := n.prepares.Load(), n.statements.Load(), n.begins.Load()
	f()
	return n.prepares.Load() - p, n.statements.Load() - s, n.begins.Load() - b
}

// segmentOf returns s.Segment(name), failing the test on an error.
func segmentOf(t testing.TB, s *sqlstore.Store, name string) segment.Distributor {
	t.Helper()
	seg, err := s.Segment(name)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

// emptyTables deletes every row of the store's tables (all three when none
// is named), as a restore of an empty backup would.
func emptyTables(t testing.TB, db *sql.DB, tables ...string) {
	t.Helper()
	if len(tables) == 0 {
		tables = []string{"idforge_segment", "idforge_machine", "idforge_meta"}
	}
	for _, table := range tables {
		if _, err := db.ExecContext(context.Background(), "DELETE FROM "+table); err != nil {
			t.Fatalf("emptying %s: %v", table, err)
		}
	}
}

// snapshots numbers the copies snapshotTables makes.
var snapshots atomic.Int64

// snapshotTables copies the store's three tables into tables of their own
// and returns a function that puts the copies back, as a restored backup
// would.
func snapshotTables(t testing.TB, db *sql.DB) func(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	n := snapshots.Add(1)
	tables := []string{"idforge_segment", "idforge_machine", "idforge_meta"}
	copyOf := func(table string) string { return fmt.Sprintf("snap%d_%s", n, table) }
	for _, table := range tables {
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+copyOf(table)+" AS SELECT * FROM "+table); err != nil {
			t.Fatalf("copying %s: %v", table, err)
		}
	}
	return func(t *testing.T) {
		t.Helper()
		for _, table := range tables {
			for _, q := range []string{"DELETE FROM " + table, "INSERT INTO " + table + " SELECT * FROM " + copyOf(table)} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("restoring %s: %v", table, err)
				}
			}
		}
	}
}
