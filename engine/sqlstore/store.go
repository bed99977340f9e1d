// Package sqlstore keeps segment sequences and machine-ID assignments in an
// SQL database through database/sql: MySQL/MariaDB, PostgreSQL and SQLite
// (3.35 or later), in the tables of package schema.
//
// A [Store] binds a *sql.DB to its dialect and makes the distributors:
// [SegmentDistributor] (a segment.Distributor) and [MachineDistributor] (a
// machine.Distributor). They run prepared statements, prepared on each
// pooled connection at first use:
//
//   - a segment fetch is one statement, one round trip, on every dialect:
//     UPDATE … RETURNING on PostgreSQL and SQLite, UPDATE … SET last_max_id
//     = LAST_INSERT_ID(last_max_id + ?) on MySQL/MariaDB, whose result
//     carries the new maximum (a new name's first fetch also inserts its
//     row);
//   - a machine ID is claimed with one conditional UPDATE that prefers the
//     instance's own row, then a free or expired one, and re-checks that
//     choice against racing writers; only when none is left is the next
//     number inserted, guarded by the primary key. [MachineDistributor]
//     lists the round trips per path and dialect.
//
// The package imports no driver: open the *sql.DB with any driver of the
// three databases. SQLite connections written by several goroutines or
// processes need a busy timeout (for example _pragma=busy_timeout(10000)).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/schema"
)

// Option configures a [Store] or a distributor made without one.
type Option func(*config)

type config struct {
	dialect schema.Dialect // 0: detect
	tables  schema.Tables
	start   int64
	clock   clock.Clock
	create  bool
	err     error // the first invalid option
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithDialect sets the database's dialect instead of detecting it. Needed
// when the driver is hidden behind a wrapper and the distributor is made
// without [Open].
func WithDialect(d schema.Dialect) Option {
	return func(c *config) {
		if d != schema.MySQL && d != schema.Postgres && d != schema.SQLite {
			c.fail(fmt.Errorf("%w: sqlstore: dialect %v", engine.ErrInvalidConfig, d))
		}
		c.dialect = d
	}
}

// WithTablePrefix uses the tables prefix+"segment" and prefix+"machine"
// instead of idforge_segment and idforge_machine (see schema.NewTables).
func WithTablePrefix(prefix string) Option {
	return func(c *config) {
		t, err := schema.NewTables(prefix)
		if err != nil {
			c.fail(fmt.Errorf("%w: sqlstore: %w", engine.ErrInvalidConfig, err))
		}
		c.tables = t
	}
}

// WithStart sets where segment sequences created on first use begin: the
// first ID handed out is start+1. Default 0. Existing sequences are not
// changed.
func WithStart(start int64) Option {
	return func(c *config) {
		if start < 0 {
			c.fail(fmt.Errorf("%w: sqlstore: segment start %d is negative", engine.ErrInvalidConfig, start))
		}
		c.start = start
	}
}

// WithClock sets the clock that dates rows and decides which machine IDs
// have expired. Default clock.System; tests use a clock.Fake.
func WithClock(c clock.Clock) Option {
	return func(cfg *config) {
		if c == nil {
			cfg.fail(fmt.Errorf("%w: sqlstore: nil clock", engine.ErrInvalidConfig))
		}
		cfg.clock = c
	}
}

// WithCreateTables makes [Open] create the tables if they do not exist
// (schema's Tables.Ensure). The constructors without a context reject it.
func WithCreateTables() Option { return func(c *config) { c.create = true } }

func newConfig(opts []Option) (config, error) {
	cfg := config{clock: clock.System}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg, cfg.err
}

// minSQLite is the first SQLite with UPDATE … RETURNING.
var minSQLite = [3]int{3, 35, 0}

// Store is a database holding the ID tables, with the statements the
// distributors run prepared on first use. It is safe for concurrent use;
// Close releases the prepared statements, not the *sql.DB.
type Store struct {
	db     *sql.DB
	cfg    config
	stmts  []*stmt
	seg    segmentStmts
	mach   machineStmts
	closed atomic.Bool
}

// Open returns a Store on db. It detects the dialect unless [WithDialect]
// is given (asking the server when the driver is not a known one), checks
// that SQLite is new enough, and with [WithCreateTables] creates the tables.
func Open(ctx context.Context, db *sql.DB, opts ...Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: sqlstore: nil *sql.DB", engine.ErrInvalidConfig)
	}
	if cfg.dialect == 0 {
		if cfg.dialect, err = schema.Detect(ctx, db); err != nil {
			return nil, fmt.Errorf("sqlstore: %w: %w", engine.ErrStoreUnavailable, err)
		}
	}
	if cfg.dialect == schema.SQLite {
		if err := checkSQLite(ctx, db); err != nil {
			return nil, err
		}
	}
	if cfg.create {
		if err := cfg.tables.Ensure(ctx, db, cfg.dialect); err != nil {
			return nil, fmt.Errorf("sqlstore: %w: %w", engine.ErrStoreUnavailable, err)
		}
	}
	return newStore(db, cfg), nil
}

func checkSQLite(ctx context.Context, db *sql.DB) error {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err != nil {
		return fmt.Errorf("sqlstore: %w: reading the SQLite version: %w", engine.ErrStoreUnavailable, err)
	}
	var got [3]int
	for i, part := range strings.SplitN(v, ".", 3) {
		got[i], _ = strconv.Atoi(part)
	}
	for i := range got {
		if got[i] != minSQLite[i] {
			if got[i] < minSQLite[i] {
				return fmt.Errorf("%w: sqlstore needs SQLite 3.35 or later (UPDATE … RETURNING), the driver has %s", engine.ErrInvalidConfig, v)
			}
			break
		}
	}
	return nil
}

// openWithoutContext makes a Store for the distributor constructors that
// take no context: they cannot ask the server, so the dialect comes from
// WithDialect or the driver's type.
func openWithoutContext(db *sql.DB, opts []Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: sqlstore: nil *sql.DB", engine.ErrInvalidConfig)
	}
	if cfg.create {
		return nil, fmt.Errorf("%w: sqlstore: WithCreateTables needs Open, which has a context", engine.ErrInvalidConfig)
	}
	if cfg.dialect == 0 {
		if cfg.dialect, err = schema.DriverDialect(db.Driver()); err != nil {
			return nil, fmt.Errorf("%w: sqlstore: %w; pass WithDialect or use Open", engine.ErrInvalidConfig, err)
		}
	}
	return newStore(db, cfg), nil
}

func newStore(db *sql.DB, cfg config) *Store {
	s := &Store{db: db, cfg: cfg}
	s.seg = newSegmentStmts(s)
	s.mach = newMachineStmts(s)
	return s
}

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() schema.Dialect { return s.cfg.dialect }

// Tables returns the store's table names.
func (s *Store) Tables() schema.Tables { return s.cfg.tables }

// Close releases the prepared statements; distributors of the store fail
// with engine.ErrClosed afterwards. It does not close the *sql.DB.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	var first error
	for _, st := range s.stmts {
		if err := st.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// unavailable wraps a database failure: it matches both
// engine.ErrStoreUnavailable and the driver's error (or engine.ErrClosed
// alone after Close).
func (s *Store) unavailable(what string, err error) error {
	if errors.Is(err, engine.ErrClosed) {
		return fmt.Errorf("sqlstore (%s): %s: %w", s.cfg.dialect, what, err)
	}
	return fmt.Errorf("sqlstore (%s): %s: %w: %w", s.cfg.dialect, what, engine.ErrStoreUnavailable, err)
}

func (s *Store) nowMillis() int64 { return s.cfg.clock.Now().UnixMilli() }

// stmt is one statement of a Store, written with PostgreSQL's $n
// placeholders and rendered for the dialect, prepared on first use so a
// call costs one round trip (go-sql-driver/mysql would otherwise prepare,
// execute and close each parameterized statement).
type stmt struct {
	db    *sql.DB
	query string
	order []int // MySQL: which argument each '?' takes; nil keeps the order

	mu     sync.Mutex
	closed bool
	ready  atomic.Pointer[sql.Stmt]
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// stmt renders src, whose {seg} and {machine} stand for the table names.
func (s *Store) stmt(src string) *stmt {
	src = strings.NewReplacer("{seg}", s.cfg.tables.Segment(), "{machine}", s.cfg.tables.Machine()).Replace(src)
	st := &stmt{db: s.db}
	switch s.cfg.dialect {
	case schema.Postgres:
		st.query = src
	case schema.SQLite:
		// ?NNN binds argument NNN in every SQLite driver; $NNN does not.
		st.query = placeholder.ReplaceAllString(src, "?$1")
	default:
		st.query = placeholder.ReplaceAllStringFunc(src, func(m string) string {
			n, _ := strconv.Atoi(m[1:])
			st.order = append(st.order, n-1)
			return "?"
		})
	}
	s.stmts = append(s.stmts, st)
	return st
}

func (st *stmt) prepared(ctx context.Context) (*sql.Stmt, error) {
	if p := st.ready.Load(); p != nil {
		return p, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, engine.ErrClosed
	}
	if p := st.ready.Load(); p != nil {
		return p, nil
	}
	p, err := st.db.PrepareContext(ctx, st.query)
	if err != nil {
		return nil, err
	}
	st.ready.Store(p)
	return p, nil
}

func (st *stmt) close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if p := st.ready.Swap(nil); p != nil {
		return p.Close()
	}
	return nil
}

func (st *stmt) args(in []any) []any {
	if st.order == nil {
		return in
	}
	out := make([]any, len(st.order))
	for i, n := range st.order {
		out[i] = in[n]
	}
	return out
}

func (st *stmt) exec(ctx context.Context, args ...any) (sql.Result, error) {
	p, err := st.prepared(ctx)
	if err != nil {
		return nil, err
	}
	return p.ExecContext(ctx, st.args(args)...)
}

// queryRow scans the first row into dest; it returns false, nil when the
// statement returned no row.
func (st *stmt) queryRow(ctx context.Context, dest []any, args ...any) (bool, error) {
	p, err := st.prepared(ctx)
	if err != nil {
		return false, err
	}
	err = p.QueryRowContext(ctx, st.args(args)...).Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
