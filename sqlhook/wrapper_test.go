package sqlhook_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/sqlhook"
)

// fake is a driver that records what the wrapper asks of it. With full its
// connections implement every optional interface; without, only
// driver.Conn, so the wrapper must do what database/sql does for them.
type fake struct {
	full    bool
	skip    bool // ExecContext and QueryContext answer driver.ErrSkip, as MySQL without interpolateParams
	badConn int  // that many executions answer driver.ErrBadConn first
	discard bool // record nothing: for benchmarks

	mu     sync.Mutex
	calls  []string
	values [][]driver.Value // the arguments of each execution the fake ran
	closed bool
}

func (f *fake) record(call string) {
	if f.discard {
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *fake) called(call string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.calls, call)
}

// run records one execution's arguments unless it answers ErrBadConn.
func (f *fake) run(args []driver.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.badConn > 0 {
		f.badConn--
		return driver.ErrBadConn
	}
	if !f.discard {
		f.values = append(f.values, args)
	}
	return nil
}

func (f *fake) Connect(context.Context) (driver.Conn, error) { return f.Open("") }
func (f *fake) Driver() driver.Driver                        { return fakeDriver{f} }
func (f *fake) Close() error                                 { f.closed = true; return nil }

func (f *fake) Open(string) (driver.Conn, error) {
	if f.full {
		return &fullConn{bareConn{f}}, nil
	}
	return &bareConn{f}, nil
}

type fakeDriver struct{ f *fake }

func (d fakeDriver) Open(name string) (driver.Conn, error) { return d.f.Open(name) }

type bareConn struct{ f *fake }

func (c *bareConn) Prepare(q string) (driver.Stmt, error) {
	c.f.record("Prepare")
	return &fakeStmt{c.f}, nil
}
func (c *bareConn) Close() error              { return nil }
func (c *bareConn) Begin() (driver.Tx, error) { c.f.record("Begin"); return fakeTx{}, nil }

type fullConn struct{ bareConn }

func (c *fullConn) PrepareContext(_ context.Context, q string) (driver.Stmt, error) {
	c.f.record("PrepareContext")
	return &fakeStmt{c.f}, nil
}

func (c *fullConn) BeginTx(_ context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		c.f.record("BeginTx read-only")
	}
	return fakeTx{}, nil
}

func (c *fullConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.f.skip {
		return nil, driver.ErrSkip
	}
	if err := c.f.run(vals(args)); err != nil {
		return nil, err
	}
	return driver.RowsAffected(1), nil
}

func (c *fullConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.f.skip {
		return nil, driver.ErrSkip
	}
	if err := c.f.run(vals(args)); err != nil {
		return nil, err
	}
	return &fakeRows{v: vals(args)}, nil
}

func (c *fullConn) Ping(context.Context) error { c.f.record("Ping"); return nil }
func (c *fullConn) ResetSession(context.Context) error {
	c.f.record("ResetSession")
	return nil
}
func (c *fullConn) IsValid() bool { c.f.record("IsValid"); return true }

// CheckNamedValue turns the test's own type into an int64, as drivers do
// for types of theirs; anything else goes on to database/sql.
func (c *fullConn) CheckNamedValue(nv *driver.NamedValue) error {
	c.f.record("CheckNamedValue")
	if v, ok := nv.Value.(custom); ok {
		nv.Value = int64(v)
		return nil
	}
	return driver.ErrSkip
}

type custom int

type fakeStmt struct{ f *fake }

func (s *fakeStmt) Close() error  { return nil }
func (s *fakeStmt) NumInput() int { return -1 }
func (s *fakeStmt) Exec(args []driver.Value) (driver.Result, error) {
	if err := s.f.run(args); err != nil {
		return nil, err
	}
	return driver.RowsAffected(1), nil
}
func (s *fakeStmt) Query(args []driver.Value) (driver.Rows, error) {
	if err := s.f.run(args); err != nil {
		return nil, err
	}
	return &fakeRows{v: args}, nil
}

// ColumnConverter is the legacy interface some drivers still have; the
// wrapper must show it to database/sql.
func (s *fakeStmt) ColumnConverter(int) driver.ValueConverter {
	s.f.record("ColumnConverter")
	return driver.DefaultParameterConverter
}

type fakeTx struct{}

func (fakeTx) Commit() error   { return nil }
func (fakeTx) Rollback() error { return nil }

// fakeRows is one row holding the statement's arguments.
type fakeRows struct {
	v    []driver.Value
	done bool
}

func (r *fakeRows) Columns() []string {
	cols := make([]string, len(r.v))
	for i := range cols {
		cols[i] = "c"
	}
	return cols
}
func (r *fakeRows) Close() error { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dest, r.v)
	return nil
}

func vals(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

func openFake(t *testing.T, f *fake) (*sql.DB, *counting) {
	t.Helper()
	reg := newCounting(t)
	db := sql.OpenDB(sqlhook.Wrap(f, sqlhook.Settings{Registry: reg}))
	t.Cleanup(func() { db.Close() })
	return db, reg
}

// TestOneDrawPerExecution: whatever way the driver takes — ExecContext,
// driver.ErrSkip and a retry through Prepare, driver.ErrBadConn and a retry
// on a new connection, a driver with no ExecContext at all — each
// execution draws one ID per marker, and the driver gets that ID.
func TestOneDrawPerExecution(t *testing.T) {
	cases := map[string]*fake{
		"ExecContext":     {full: true},
		"ErrSkip":         {full: true, skip: true},
		"ErrBadConn":      {full: true, badConn: 2},
		"ErrSkip+BadConn": {full: true, skip: true, badConn: 1},
		"bare driver":     {},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			db, reg := openFake(t, f)
			n := sqlhook.Next("snowflake", "")
			res, err := db.Exec("INSERT", n, custom(7))
			if err != nil {
				t.Fatal(err)
			}
			var q int64
			if err := db.QueryRow("SELECT", n).Scan(&q); err != nil {
				t.Fatal(err)
			}
			if got := reg.draws.Load(); got != 2 {
				t.Errorf("%d draws for two executions; want 2", got)
			}
			if len(f.values) != 2 {
				t.Fatalf("the driver ran %d statements; want 2", len(f.values))
			}
			first := f.values[0][0].(int64)
			if id := lastID(t, res); id != first || q != n.ID() || q == first {
				t.Errorf("driver got %v then %d; LastInsertId %d, marker %d", f.values[0], q, id, n.ID())
			}
			if want := int64(7); f.values[0][1] != want {
				t.Errorf("custom value reached the driver as %#v; want %d", f.values[0][1], want)
			}
		})
	}
}

// TestPassThrough: the optional interfaces reach the base connection.
func TestPassThrough(t *testing.T) {
	f := &fake{full: true, skip: true}
	db, _ := openFake(t, f)
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if _, err := db.Exec("INSERT", sqlhook.Next("snowflake", ""), custom(1), "text"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		r, ok := dc.(interface{ Raw() driver.Conn })
		if !ok {
			t.Fatalf("%T has no Raw method", dc)
		}
		if _, ok := r.Raw().(*fullConn); !ok {
			t.Errorf("Raw() = %T; want the base *fullConn", r.Raw())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := db.Exec("INSERT", 1); err != nil { // a reused connection: reset, validated
		t.Fatal(err)
	}
	for _, call := range []string{"Ping", "BeginTx read-only", "PrepareContext", "CheckNamedValue", "ColumnConverter", "ResetSession", "IsValid"} {
		if !f.called(call) {
			t.Errorf("%s did not reach the base driver (calls: %v)", call, f.calls)
		}
	}
	// db.Driver() is the base driver wrapped: its connections draw too.
	c, err := db.Driver().Open("")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(driver.NamedValueChecker); !ok {
		t.Errorf("db.Driver().Open() = %T, not the wrapper", c)
	}
	c.Close()
	db.Close()
	if !f.closed {
		t.Error("db.Close did not close the base connector")
	}
}

// TestBareDriver: for a connection with no optional interface, the wrapper
// answers as database/sql does.
func TestBareDriver(t *testing.T) {
	f := &fake{}
	db, _ := openFake(t, f)
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if _, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only BeginTx on a driver without BeginTx: %v", err)
	}
	if _, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}); err == nil {
		t.Error("serializable BeginTx on a driver without BeginTx: no error")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT", sqlhook.Next("snowflake", "")); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if _, err := db.Exec("INSERT", sql.Named("id", sqlhook.Next("snowflake", ""))); err == nil || !strings.Contains(err.Error(), "Named") {
		t.Errorf("named argument on a driver without named parameters: %v", err)
	}
	if !f.called("Begin") || !f.called("Prepare") {
		t.Errorf("calls: %v", f.calls)
	}
}

// TestOpen: Open finds a registered driver as sql.Open does.
func TestOpen(t *testing.T) {
	f := &fake{full: true}
	sql.Register("sqlhook-fake", fakeDriver{f})
	reg := newCounting(t)
	db, err := sqlhook.Open("sqlhook-fake", "", sqlhook.Settings{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := sqlhook.Next("chain", "x")
	if _, err := db.Exec("INSERT", n); err != nil {
		t.Fatal(err)
	}
	if n.ID() != 1_000_001 || f.values[0][0] != n.ID() {
		t.Errorf("marker %d, driver got %v", n.ID(), f.values[0])
	}
}

// TestNoMarkerNoAllocation: a statement without a marker costs nothing the
// base driver does not, on the ExecContext path and on the ErrSkip path
// that prepares a statement per execution.
func TestNoMarkerNoAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations")
	}
	for _, skip := range []bool{false, true} {
		bare := sql.OpenDB(&fake{full: true, skip: skip})
		defer bare.Close()
		hooked, _ := openFake(t, &fake{full: true, skip: skip})
		exec := func(db *sql.DB) func() {
			return func() {
				if _, err := db.Exec("INSERT", int64(1), "x"); err != nil {
					t.Fatal(err)
				}
			}
		}
		exec(bare)()
		exec(hooked)()
		b, h := testing.AllocsPerRun(200, exec(bare)), testing.AllocsPerRun(200, exec(hooked))
		if h > b {
			t.Errorf("ErrSkip %v: %.1f allocations per Exec through the plugin, %.1f without", skip, h, b)
		}
	}
}

// TestValueWithoutPlugin: the marker's Value fails, naming the fix.
func TestValueWithoutPlugin(t *testing.T) {
	_, err := sqlhook.Next("chain", "order").Value()
	if !errors.Is(err, sqlhook.ErrNotHooked) || !strings.Contains(err.Error(), `sqlhook.Next("chain", "order")`) {
		t.Errorf("Value: %v", err)
	}
	db := sql.OpenDB(&fake{full: true})
	defer db.Close()
	if _, err := db.Exec("INSERT", sqlhook.Next("snowflake", "")); !errors.Is(err, sqlhook.ErrNotHooked) {
		t.Errorf("Exec without the plugin: %v", err)
	}
}
