package sqlhook

import (
	"context"
	"database/sql/driver"
	"errors"
)

// conn wraps a driver.Conn. It implements every optional interface
// database/sql looks for, and each one does what database/sql itself does
// when the base connection lacks it (as XSAM/otelsql's wrapper does), so a
// driver behaves the same with and without the plugin. database/sql
// serializes the calls on one connection, statements included.
type conn struct {
	base driver.Conn
	h    *hook

	// The base connection's optional interfaces, looked up once; nil
	// where it lacks one.
	pc     driver.ConnPrepareContext
	bt     driver.ConnBeginTx
	ec     driver.ExecerContext
	ex     driver.Execer
	qc     driver.QueryerContext
	q      driver.Queryer
	nvc    driver.NamedValueChecker
	pinger driver.Pinger
	rs     driver.SessionResetter
	val    driver.Validator

	// st is the wrapper of the connection's statements while none is
	// open: database/sql prepares a statement for each Exec a driver
	// answers with driver.ErrSkip (MySQL without interpolateParams), and
	// the plugin should cost no allocation there.
	st     stmt
	stOpen bool
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

func newConn(base driver.Conn, h *hook) *conn {
	c := &conn{base: base, h: h}
	c.pc, _ = base.(driver.ConnPrepareContext)
	c.bt, _ = base.(driver.ConnBeginTx)
	c.ec, _ = base.(driver.ExecerContext)
	c.ex, _ = base.(driver.Execer)
	c.qc, _ = base.(driver.QueryerContext)
	c.q, _ = base.(driver.Queryer)
	c.nvc, _ = base.(driver.NamedValueChecker)
	c.pinger, _ = base.(driver.Pinger)
	c.rs, _ = base.(driver.SessionResetter)
	c.val, _ = base.(driver.Validator)
	return c
}

// Raw returns the base driver's connection, for sql.Conn.Raw users (pgx's
// *stdlib.Conn for CopyFrom), under the name XSAM/otelsql gives it.
func (c *conn) Raw() driver.Conn { return c.base }

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	si, err := c.base.Prepare(query)
	if err != nil {
		return nil, err
	}
	return c.wrapStmt(si), nil
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.pc != nil {
		si, err := c.pc.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		return c.wrapStmt(si), nil
	}
	si, err := c.base.Prepare(query)
	if err != nil {
		return nil, err
	}
	select {
	default:
	case <-ctx.Done():
		si.Close()
		return nil, ctx.Err()
	}
	return c.wrapStmt(si), nil
}

func (c *conn) Close() error { return c.base.Close() }

func (c *conn) Begin() (driver.Tx, error) { return c.base.Begin() }

// BeginTx returns the base transaction itself: statements in a transaction
// run on its connection, through this wrapper.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.bt != nil {
		return c.bt.BeginTx(ctx, opts)
	}
	// What database/sql does for a connection without BeginTx.
	if opts.Isolation != driver.IsolationLevel(0) {
		return nil, errors.New("sql: driver does not support non-default isolation level")
	}
	if opts.ReadOnly {
		return nil, errors.New("sql: driver does not support read-only transactions")
	}
	tx, err := c.base.Begin()
	if err == nil && ctx.Done() != nil {
		select {
		default:
		case <-ctx.Done():
			tx.Rollback()
			return nil, ctx.Err()
		}
	}
	return tx, err
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.ec == nil && c.ex == nil {
		return nil, driver.ErrSkip // database/sql prepares the statement
	}
	exec := func() (driver.Result, error) {
		if c.ec != nil {
			return c.ec.ExecContext(ctx, query, args)
		}
		dargs, err := values(ctx, args)
		if err != nil {
			return nil, err
		}
		return c.ex.Exec(query, dargs)
	}
	if !hasMarker(args) {
		return exec()
	}
	d := draws{h: c.h}
	if err := d.replace(ctx, args); err != nil {
		return nil, err
	}
	return d.settle(exec())
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.qc == nil && c.q == nil {
		return nil, driver.ErrSkip
	}
	run := func() (driver.Rows, error) {
		if c.qc != nil {
			return c.qc.QueryContext(ctx, query, args)
		}
		dargs, err := values(ctx, args)
		if err != nil {
			return nil, err
		}
		return c.q.Query(query, dargs)
	}
	if !hasMarker(args) {
		return run()
	}
	d := draws{h: c.h}
	if err := d.replace(ctx, args); err != nil {
		return nil, err
	}
	rows, err := run()
	if err != nil && notRun(err) {
		d.undo()
	}
	return rows, err
}

func (c *conn) Ping(ctx context.Context) error {
	if c.pinger != nil {
		return c.pinger.Ping(ctx)
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.rs != nil {
		return c.rs.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if c.val != nil {
		return c.val.IsValid()
	}
	return true
}

// CheckNamedValue implements driver.NamedValueChecker: a marker passes as
// it is, to be replaced when the statement runs (database/sql converts the
// arguments again when it retries a statement through Prepare, so drawing
// here could draw twice for one execution); any other value goes to the
// base connection's checker, or on to database/sql's conversion.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if _, ok := nv.Value.(*Marker); ok {
		return nil
	}
	if c.nvc != nil {
		return c.nvc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// values is database/sql's conversion for drivers without the context
// methods.
func values(ctx context.Context, args []driver.NamedValue) ([]driver.Value, error) {
	dargs := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("sql: driver does not support the use of Named Parameters")
		}
		dargs[i] = a.Value
	}
	select {
	default:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return dargs, nil
}

func (c *conn) wrapStmt(si driver.Stmt) driver.Stmt {
	s := &c.st
	if c.stOpen {
		s = &stmt{}
	}
	*s = stmt{base: si, c: c}
	s.ec, _ = si.(driver.StmtExecContext)
	s.qc, _ = si.(driver.StmtQueryContext)
	s.nvc, _ = si.(driver.NamedValueChecker)
	if s == &c.st {
		c.stOpen = true
	}
	// database/sql asks the statement for ColumnConverter: show it only
	// where the base has one. A one-pointer struct boxes without allocating.
	if _, ok := si.(driver.ColumnConverter); ok {
		return ccStmt{s}
	}
	return s
}

// stmt wraps a driver.Stmt, as conn wraps its connection.
type stmt struct {
	base driver.Stmt
	c    *conn
	ec   driver.StmtExecContext
	qc   driver.StmtQueryContext
	nvc  driver.NamedValueChecker
}

var (
	_ driver.Stmt              = (*stmt)(nil)
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
)

func (s *stmt) Close() error {
	err := s.base.Close()
	if s == &s.c.st {
		s.c.stOpen = false
	}
	return err
}

func (s *stmt) NumInput() int { return s.base.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	exec := func() (driver.Result, error) {
		if s.ec != nil {
			return s.ec.ExecContext(ctx, args)
		}
		dargs, err := values(ctx, args)
		if err != nil {
			return nil, err
		}
		return s.base.Exec(dargs)
	}
	if !hasMarker(args) {
		return exec()
	}
	d := draws{h: s.c.h}
	if err := d.replace(ctx, args); err != nil {
		return nil, err
	}
	return d.settle(exec())
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	query := func() (driver.Rows, error) {
		if s.qc != nil {
			return s.qc.QueryContext(ctx, args)
		}
		dargs, err := values(ctx, args)
		if err != nil {
			return nil, err
		}
		return s.base.Query(dargs)
	}
	if !hasMarker(args) {
		return query()
	}
	d := draws{h: s.c.h}
	if err := d.replace(ctx, args); err != nil {
		return nil, err
	}
	rows, err := query()
	if err != nil && notRun(err) {
		d.undo()
	}
	return rows, err
}

// CheckNamedValue is conn's, with the statement's own checker first, as
// database/sql picks them.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if _, ok := nv.Value.(*Marker); ok {
		return nil
	}
	if s.nvc != nil {
		return s.nvc.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

// ccStmt is a stmt whose base has a ColumnConverter.
type ccStmt struct{ *stmt }

func (s ccStmt) ColumnConverter(idx int) driver.ValueConverter {
	return s.base.(driver.ColumnConverter).ColumnConverter(idx)
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}
