package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/internal/sqlschema"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/schema"
)

// Settings configures a [Store]. The zero value of every field is its
// documented default; [Open] validates them once.
type Settings struct {
	// Dialect is the database's SQL dialect; 0 detects it from the driver's
	// type, or by asking the server when the driver is hidden behind a
	// wrapper.
	Dialect schema.Dialect
	// TablePrefix starts the table names (default "idforge_"): a
	// plain identifier of at most 40 bytes.
	TablePrefix string
	// Start is where segment sequences created on first use begin: the
	// first ID handed out is Start+1. Default 0; negative is an error.
	// Existing sequences are not changed.
	Start int64
	// Floor, if set, reads from the data how far a sequence has gone: the
	// largest ID its tables hold, for example
	// SELECT COALESCE(MAX(id), 0) FROM orders for the sequence "order".
	// Before a store value's first fetch of a name, and its first after
	// every store reset it sees, the store raises the counter to Floor's
	// answer (creating it if missing; a counter never moves down), and
	// counts the answer as handed out: a counter later found below it is a
	// store that went back. So a counter the store lost comes back above
	// every ID already written, even when no process that used it is alive
	// to report its floor, and a table moved from AUTO_INCREMENT keeps its
	// keys. Floor runs once per name, process start and reset (once per
	// fetch racing the first), never per ID. It runs on the fetching
	// goroutine (a chain's refill) with the fetch's context, so it should
	// honour ctx: a chain's Close waits for it. It sees committed rows
	// only: stop other writers of the table (the old AUTO_INCREMENT code)
	// before switching. A failing or panicking Floor fails that fetch
	// (wrapping engine.ErrStoreUnavailable) and is asked again at the next.
	//
	// Floor (and a Floor given to [Store.Segment]) is also what lets a
	// sequence start on a store that was not initialised as brand-new: see
	// [Settings.Init].
	Floor engine.Floor
	// Clock dates rows, decides which machine IDs have expired and times
	// the reset grace (default clock.System); tests use a clocktest.Fake.
	Clock clock.Clock
	// CreateTables makes [Open] create the tables if they do not exist.
	CreateTables bool
	// Init declares the store brand-new when [Open] finds it without an
	// epoch and with empty tables, as `idforge store init` does: it never
	// handed out an ID, so it hands out at once (no reset grace) and a
	// sequence missing from it starts at Start. Without Init a store found
	// without an epoch may have been wiped after handing out IDs (a wipe and
	// a first start look alike), so a missing sequence starts only above a
	// Floor and is refused with engine.ErrNoFloor without one. For setup
	// jobs, tests, demos and an embedded SQLite file the program has just
	// created; a service that sets it takes a store wiped under it for a new
	// one. A store without an epoch whose tables hold rows is refused.
	Init bool
	// RideThrough is the store's ride-through window: how long a process
	// cut off from the store goes on issuing snowflake IDs (and chain IDs
	// under segment.Settings.Fence). Every heartbeat of a machine-ID lease
	// stores its clock plus RideThrough, and the generator refuses
	// timestamps past what it last stored, so whoever takes the machine ID
	// next (a reclaim, a restart after kill -9 with the clock stepped back)
	// starts above everything it issued. Default 1 s; it must be longer
	// than the lease's Heartbeat and at most its SafeGuard minus SkewMargin
	// (the lease refuses it otherwise: past that the machine ID may be
	// reclaimed, so a window of a minute needs a SafeGuard of 75 s or more;
	// the default is 5 min). Its price is paid where that is safe: a
	// first start on a store not declared brand-new ([Settings.Init]), and
	// every start after a wipe, waits RideThrough plus 1 s (the reset
	// grace), so that every process cut off from the wiped store has
	// stopped; a stable instance restarted after an unclean stop waits up
	// to RideThrough for its own last timestamp. Raise it (say to a minute)
	// to ride out store outages that long. The store records it; [Open]
	// refuses a different value with engine.ErrInvalidConfig, since every
	// process sharing a store must use the same window: stop them all and
	// run `idforge store ride-through D` to change it. Negative: no
	// reservation, a lease then issues until its safe-guard runs out and
	// needs a ResetGrace above that (tests and benchmarks). At most 24 h:
	// [Open] refuses more with engine.ErrInvalidConfig.
	RideThrough time.Duration
	// ResetGrace is how long after an epoch's creation the store hands
	// nothing out (default RideThrough plus 1 s, 2 s by default; with a
	// negative RideThrough 2 s): long enough for every process of the
	// forgotten epoch to stop, through a failing heartbeat or, cut off from
	// the store, through its ride-through window running out. The second
	// beyond the window is the clock skew between hosts a reset tolerates:
	// a wipe erases the stored timestamps that otherwise absorb skew.
	// The registry's lease refuses to issue without the store for as
	// long (the store's Terms carry the grace). Set it only to raise the skew allowed, or negative to wait
	// for nothing: only for tests, or a store no other process uses. At
	// most 48 h: [Open] refuses more with engine.ErrInvalidConfig.
	ResetGrace time.Duration
	// Logger receives the line saying the store waits out its reset grace
	// (default slog.Default()).
	Logger *slog.Logger
}

// minSQLite is the first SQLite with UPDATE … RETURNING.
var minSQLite = [3]int{3, 35, 0}

// Store is a database holding the ID tables, with the statements it runs
// prepared on first use. It is safe for concurrent use; Close releases the
// prepared statements, not the *sql.DB.
type Store struct {
	db     *sql.DB
	cfg    Settings
	name   string // "sqlstore (<dialect>) <prefix>*", the context of every error
	stmts  []*stmt
	seg    segmentStmts
	mach   machineStmts
	admin  adminStmts
	meta   metaStmts
	epoch  *storeepoch.State
	one    chan struct{} // SQLite: the turn every statement takes (see stmt.turn)
	closed atomic.Bool
	// rewriting: opened by OpenAdmin, which does not refuse a recorded
	// ride-through window that differs.
	rewriting bool
}

// Open returns a Store on db. It validates the settings, detects the
// dialect unless [Settings.Dialect] is given, checks that SQLite is new
// enough, creates the tables with [Settings.CreateTables], adds the
// columns a table created by an older DDL lacks (the machine table's
// holder), checks the ride-through window the store records against
// [Settings.RideThrough] (recording it when there is none), and reads the store's epoch: a store without one (a first start, or tables emptied or
// recreated: they cannot be told apart) gets a new epoch, and Open then
// waits [Settings.ResetGrace] so that processes still working under a
// forgotten epoch have stopped before this one hands anything out.
//
// SQLite allows one writer at a time, and its busy handler is not fair: a
// connection waiting for the write lock polls with growing sleeps and can
// lose it to newer writers until its busy timeout passes (SQLITE_BUSY). A
// Store on SQLite therefore runs one statement at a time, queued in Go in
// arrival order, so its own connections never compete for the lock; share
// one Store per process and database file. Open the database with a busy
// timeout for what other processes (or Stores) on the same file write, and
// with WAL when several processes share it, for example
// "file:ids.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" with
// glebarez/go-sqlite or modernc.org/sqlite. While one connection converts
// a new file to WAL, the others get SQLITE_BUSY at once whatever their busy
// timeout, so Open retries its first statement on SQLITE_BUSY for up to 10 s:
// replicas may start together on a new file.
func Open(ctx context.Context, db *sql.DB, settings ...Settings) (*Store, error) {
	return open(ctx, db, false, settings)
}

// open is [Open], or with rewriting [OpenAdmin]'s, which does not refuse a
// recorded ride-through window that differs.
func open(ctx context.Context, db *sql.DB, rewriting bool, settings []Settings) (*Store, error) {
	var cfg Settings
	switch len(settings) {
	case 0:
	case 1:
		cfg = settings[0]
	default:
		return nil, fmt.Errorf("%w: sqlstore: %d Settings given; Open takes at most one", engine.ErrInvalidConfig, len(settings))
	}
	if db == nil {
		return nil, fmt.Errorf("%w: sqlstore: nil *sql.DB", engine.ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var err error
	if cfg.RideThrough, cfg.ResetGrace, err = storeepoch.Windows("sqlstore", cfg.RideThrough, cfg.ResetGrace); err != nil {
		return nil, err
	}
	if cfg.Start < 0 {
		return nil, fmt.Errorf("%w: sqlstore: segment start %d is negative", engine.ErrInvalidConfig, cfg.Start)
	}
	if cfg.TablePrefix == "" {
		cfg.TablePrefix = "idforge_"
	}
	// The DDL checks the dialect and the prefix: a known driver's dialect
	// is told without a query, so a bad prefix is refused before one.
	if cfg.Dialect == 0 {
		if cfg.Dialect, err = sqlschema.Detect(ctx, db); err != nil {
			return nil, fmt.Errorf("sqlstore: %w: %w", engine.ErrStoreUnavailable, err)
		}
	}
	if _, err := schema.DDL(cfg.Dialect, cfg.TablePrefix); err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	s := &Store{db: db, cfg: cfg, name: fmt.Sprintf("sqlstore (%s) %s*", cfg.Dialect, cfg.TablePrefix), rewriting: rewriting}
	if cfg.Dialect == schema.SQLite {
		s.one = make(chan struct{}, 1)
		if err := s.checkSQLite(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.CreateTables {
		if err := sqlschema.Ensure(ctx, db, cfg.Dialect, cfg.TablePrefix); err != nil {
			return nil, s.unavailable("creating the tables", err)
		}
	}
	s.seg = newSegmentStmts(s)
	s.mach = newMachineStmts(s)
	s.admin = newAdminStmts(s)
	s.meta = newMetaStmts(s)
	s.epoch = storeepoch.NewState(cfg.Clock, cfg.ResetGrace)
	s.epoch.LogWaits(cfg.Logger, s.name)
	token, err := s.openEpoch(ctx)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := sqlschema.Migrate(ctx, db, cfg.Dialect, cfg.TablePrefix); err != nil {
		s.Close()
		return nil, s.unavailable("upgrading the machine table", err)
	}
	if err := s.openRideThrough(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.epoch.Set(token)
	if _, err := s.epoch.Wait(ctx); err != nil {
		s.Close()
		return nil, s.unavailable("waiting out the reset grace of a new epoch", err)
	}
	return s, nil
}

// sqliteFirstContact bounds how long Open waits out SQLITE_BUSY on its first
// statement; see [Store.checkSQLite].
const sqliteFirstContact = 10 * time.Second

// checkSQLite reads the SQLite version, which is also Open's first contact
// with the file. A connection that opens a new file with
// _pragma=journal_mode(WAL) while another connection converts it to WAL gets
// SQLITE_BUSY at once, busy timeout or not, so replicas starting together
// on a new file would fail; the conversion is over in milliseconds, so the
// first statement is retried on SQLITE_BUSY for up to sqliteFirstContact.
func (s *Store) checkSQLite(ctx context.Context) error {
	var v string
	deadline := time.Now().Add(sqliteFirstContact)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		err := s.db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v)
		if err == nil {
			break
		}
		if !sqliteBusy(err) || time.Now().After(deadline) {
			return s.unavailable("reading the SQLite version", err)
		}
		select {
		case <-ctx.Done():
			return s.unavailable("reading the SQLite version", err)
		case <-time.After(pause):
		}
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

// sqliteBusy reports whether err is SQLITE_BUSY. modernc.org/sqlite and its
// forks expose the code as a method; mattn/go-sqlite3 only in a field of its
// own type, so its message, SQLite's text for the code, is matched too.
func sqliteBusy(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code()&0xff == 5
	}
	return strings.Contains(err.Error(), "database is locked")
}

// BrandNew reports whether the store's epoch was declared brand-new
// ([Settings.Init], `idforge store init`): no sequence of it was handed out
// before the epoch, so a missing one may start at Start.
func (s admin) BrandNew() bool { return storeepoch.BrandNew(s.epoch.Token()) }

// EpochCreated returns when the store's epoch was created.
func (s admin) EpochCreated() time.Time {
	t, _ := storeepoch.Created(s.epoch.Token())
	return t
}

// Close releases the prepared statements; the store fails with
// engine.ErrClosed afterwards. It does not close the *sql.DB.
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
		return fmt.Errorf("%s: %s: %w", s.name, what, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", s.name, what, engine.ErrStoreUnavailable, err)
}

func (s *Store) nowMillis() int64 { return s.cfg.Clock.Now().UnixMilli() }

// stmt is one statement of a Store, written with PostgreSQL's $n
// placeholders and rendered for the dialect, prepared on first use so a
// call costs one round trip (go-sql-driver/mysql would otherwise prepare,
// execute and close each parameterized statement).
type stmt struct {
	db    *sql.DB
	query string
	order []int // MySQL: which argument each '?' takes; nil keeps the order
	// one is the Store's SQLite turn (nil on other dialects): one statement
	// at a time, see [Store.turn].
	one chan struct{}

	mu     sync.Mutex
	closed bool
	ready  atomic.Pointer[sql.Stmt]
}

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	// epochCheck is "{epoch $n}" in a statement's source: the epoch row
	// holds the token bound to $n.
	epochCheck = regexp.MustCompile(`\{epoch (\$\d+)\}`)
)

// stmt renders src, whose {seg}, {machine} and {meta} stand for the table
// names and {epoch $n} for the check that the epoch token is $n.
func (s *Store) stmt(src string) *stmt {
	src = epochCheck.ReplaceAllString(src, "EXISTS (SELECT 1 FROM {meta} WHERE name = 'epoch' AND value = $1)")
	src = sqlschema.Expand(src, s.cfg.TablePrefix) // the prefix was checked by Open
	st := &stmt{db: s.db, one: s.one}
	switch s.cfg.Dialect {
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
	release, err := st.turn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	p, err := st.prepared(ctx)
	if err != nil {
		return nil, err
	}
	return p.ExecContext(ctx, st.args(args)...)
}

// turn waits for the store's SQLite turn (at once on other dialects) and
// returns its release. SQLite runs one writer at a time and makes the others
// wait in its busy handler, a poll whose sleeps grow to 100 ms: under a
// steady stream of writes a waiting connection keeps losing the lock to
// newer ones and fails with SQLITE_BUSY once the busy timeout passes, however
// long it is. Taking turns in Go, in arrival order and honouring ctx, leaves
// SQLite's lock to one connection of the Store at a time; the busy handler
// only arbitrates between processes (or Stores) sharing the file.
func (st *stmt) turn(ctx context.Context) (func(), error) {
	if st.one == nil {
		return func() {}, nil
	}
	select {
	case st.one <- struct{}{}:
		return func() { <-st.one }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// execIn runs the statement in tx, unprepared: for the few statements a
// transaction needs (see [Store.inTx]).
func (st *stmt) execIn(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	return tx.ExecContext(ctx, st.query, st.args(args)...)
}

// inTx runs f in one transaction, holding the store's SQLite turn
// throughout (f runs its statements with execIn, never exec), and commits
// when f returns true, else rolls back.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) (commit bool, err error)) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.one != nil {
		select {
		case s.one <- struct{}{}:
			defer func() { <-s.one }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	commit, err := f(tx)
	if err != nil || !commit {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// queryRow scans the first row into dest; it returns false, nil when the
// statement returned no row.
func (st *stmt) queryRow(ctx context.Context, dest []any, args ...any) (bool, error) {
	release, err := st.turn(ctx)
	if err != nil {
		return false, err
	}
	defer release()
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
