package integration

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/schema"
	"github.com/idforge/idforge/tests/testdb"
)

// TestMain silences the MySQL driver, which logs every connection the fault
// proxy cuts; the tests check the errors it returns instead.
func TestMain(m *testing.M) {
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	os.Exit(m.Run())
}

// backend is one kind of store; setup makes a fresh one on its real server
// (skipping the test when the server is down, see tests/testdb).
type backend struct {
	name  string
	setup func(t *testing.T) *server
}

// backends lists every store under test. SQLite has no network address, so
// the outage test leaves it out.
var backends = []backend{
	{"sqlite", func(t *testing.T) *server { return sqlServer(t, testdb.SQLite(t)) }},
	{"mariadb", func(t *testing.T) *server { return sqlServer(t, testdb.MariaDB(t)) }},
	{"postgres", func(t *testing.T) *server { return sqlServer(t, testdb.Postgres(t)) }},
	{"redis", redisServer},
}

// forEachBackend runs f once per store, one subtest each, one after another.
func forEachBackend(t *testing.T, f func(t *testing.T, s *server)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.setup(t)) })
	}
}

// server is a fresh store (a database or a Redis key prefix) on one server.
type server struct {
	// target is the server's host:port for a proxy to forward to; "" when
	// the store is a local file.
	target string
	// tag is how the store's errors name it.
	tag string
	// open connects a new instance with a pool or client of its own, dialling
	// addr instead of the server's address when addr is not "". Everything it
	// opens is closed when the test ends.
	open func(t testing.TB, addr string) idforge.Store
	// openWindow is open with the store's RideThrough set to w (0: the
	// default); the store refuses a w other than the one it records.
	openWindow func(t testing.TB, addr string, w time.Duration) idforge.Store
	// lastMax reads the named sequence's last max ID straight from the store.
	lastMax func(t testing.TB, name string) int64
	// holder returns the machine ID instance id holds in namespace ns, if any.
	holder func(t testing.TB, ns, id string) (int64, bool)
	// lastTimestamp reads the last timestamp stored for machine ID m of
	// namespace ns (what its holder's heartbeats reserve), 0 for none.
	lastTimestamp func(t testing.TB, ns string, m int64) int64
	// worker is the store part of a worker process's configuration
	// (procs_test.go), dialling addr instead of the server's address when
	// addr is not "".
	worker func(addr string) workerConfig
	// wipe empties the store as a reset would (emptied tables, a Redis that
	// lost its data): everything it handed out is forgotten, the epoch too.
	wipe func(t testing.TB)
	// setRideThrough rewrites the window the store records to w, as
	// `idforge store ride-through -force` does (the store's Admin).
	setRideThrough func(t testing.TB, w time.Duration) error
}

func sqlServer(t *testing.T, d testdb.DB) *server {
	ctx := context.Background()
	admin := d.Open(t)
	adminStore, err := sqlstore.Open(ctx, admin, sqlstore.Settings{CreateTables: true, Init: true})
	if err != nil {
		t.Fatalf("creating the ID tables on %s: %v", d.Name, err)
	}
	adminStore.Close()
	dialect, err := schema.ParseDialect(d.Driver)
	if err != nil {
		t.Fatalf("detecting %s's dialect: %v", d.Name, err)
	}
	target, via := dsnVia(t, d)
	openWindow := func(t testing.TB, addr string, w time.Duration) idforge.Store {
		t.Helper()
		dsn := d.DSN
		if addr != "" {
			dsn = via(addr)
		}
		db, err := sql.Open(d.Driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		st, err := sqlstore.Open(ctx, db, sqlstore.Settings{RideThrough: w})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return &server{
		target:     target,
		tag:        "sqlstore (" + dialect.String() + ")",
		openWindow: openWindow,
		setRideThrough: func(t testing.TB, w time.Duration) error {
			t.Helper()
			ad, err := sqlstore.OpenAdmin(ctx, admin)
			if err != nil {
				return err
			}
			defer ad.Close()
			_, err = ad.SetRideThrough(ctx, w, true)
			return err
		},
		open: func(t testing.TB, addr string) idforge.Store {
			t.Helper()
			return openWindow(t, addr, 0)
		},
		lastMax: func(t testing.TB, name string) int64 {
			t.Helper()
			var m int64
			if err := admin.QueryRowContext(ctx, d.Rebind("SELECT last_max_id FROM idforge_segment WHERE name = ?"), name).Scan(&m); err != nil {
				t.Fatalf("reading segment %q: %v", name, err)
			}
			return m
		},
		holder: func(t testing.TB, ns, id string) (int64, bool) {
			t.Helper()
			var m int64
			err := admin.QueryRowContext(ctx, d.Rebind("SELECT machine_id FROM idforge_machine WHERE namespace = ? AND instance_id = ?"), ns, id).Scan(&m)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, false
			}
			if err != nil {
				t.Fatalf("reading the machine ID of %s/%s: %v", ns, id, err)
			}
			return m, true
		},
		lastTimestamp: func(t testing.TB, ns string, m int64) int64 {
			t.Helper()
			var ts int64
			err := admin.QueryRowContext(ctx, d.Rebind("SELECT last_timestamp FROM idforge_machine WHERE namespace = ? AND machine_id = ?"), ns, m).Scan(&ts)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatalf("reading the last timestamp of machine ID %s/%d: %v", ns, m, err)
			}
			return ts
		},
		worker: func(addr string) workerConfig {
			dsn := d.DSN
			if addr != "" {
				dsn = via(addr)
			}
			return workerConfig{SQLDriver: d.Driver, SQLDSN: dsn}
		},
		wipe: func(t testing.TB) {
			t.Helper()
			for _, table := range []string{"idforge_meta", "idforge_machine", "idforge_segment"} {
				if _, err := admin.ExecContext(ctx, "DELETE FROM "+table); err != nil {
					t.Fatalf("emptying %s: %v", table, err)
				}
			}
		},
	}
}

// dsnVia returns d's server address and a function rewriting d's DSN to dial
// another address (a proxy's); both zero for SQLite.
func dsnVia(t *testing.T, d testdb.DB) (string, func(addr string) string) {
	switch d.Driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(d.DSN)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Addr, func(addr string) string {
			c := cfg.Clone()
			c.Addr = addr
			return c.FormatDSN()
		}
	case "pgx":
		u, err := url.Parse(d.DSN)
		if err != nil {
			t.Fatal(err)
		}
		return u.Host, func(addr string) string {
			v := *u
			v.Host = addr
			return v.String()
		}
	}
	return "", nil
}

func redisServer(t *testing.T) *server {
	ctx := context.Background()
	admin, prefix := testdb.Redis(t)
	// AllowVolatile: a developer's Redis may run without persistence (CI's
	// runs with appendfsync always); engine/redisstore tests the check.
	_, err := redisstore.Open(ctx, admin, redisstore.Settings{Prefix: prefix, AllowVolatile: true, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	openWindow := func(t testing.TB, addr string, w time.Duration) idforge.Store {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: cmp.Or(addr, testdb.RedisAddr())})
		t.Cleanup(func() { c.Close() })
		st, err := redisstore.Open(ctx, c, redisstore.Settings{Prefix: prefix, AllowVolatile: true, RideThrough: w})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	return &server{
		setRideThrough: func(t testing.TB, w time.Duration) error {
			t.Helper()
			ad, err := redisstore.OpenAdmin(ctx, admin, redisstore.Settings{Prefix: prefix, AllowVolatile: true})
			if err != nil {
				return err
			}
			_, err = ad.SetRideThrough(ctx, w, true)
			return err
		},
		target:     testdb.RedisAddr(),
		tag:        prefix + "{idforge}:", // the key base every error of the store names
		openWindow: openWindow,
		open: func(t testing.TB, addr string) idforge.Store {
			t.Helper()
			return openWindow(t, addr, 0)
		},
		lastMax: func(t testing.TB, name string) int64 {
			t.Helper()
			m, err := admin.Get(ctx, prefix+"{idforge}:segment:"+name).Int64()
			if err != nil {
				t.Fatalf("reading segment %q: %v", name, err)
			}
			return m
		},
		holder: func(t testing.TB, ns, id string) (int64, bool) {
			t.Helper()
			// The key layout is redisstore's documented one.
			m, err := admin.HGet(ctx, prefix+"{idforge}:machine:"+ns+":instances", id).Int64()
			if errors.Is(err, redis.Nil) {
				return 0, false
			}
			if err != nil {
				t.Fatalf("reading the machine ID of %s/%s: %v", ns, id, err)
			}
			return m, true
		},
		lastTimestamp: func(t testing.TB, ns string, m int64) int64 {
			t.Helper()
			// "lastTimestamp|stable|instance", per redisstore's key layout.
			v, err := admin.HGet(ctx, prefix+"{idforge}:machine:"+ns+":machines", strconv.FormatInt(m, 10)).Result()
			if errors.Is(err, redis.Nil) {
				return 0
			}
			if err != nil {
				t.Fatalf("reading the last timestamp of machine ID %s/%d: %v", ns, m, err)
			}
			last, _, _ := strings.Cut(v, "|")
			ts, err := strconv.ParseInt(last, 10, 64)
			if err != nil {
				t.Fatalf("machine ID %s/%d holds %q: %v", ns, m, v, err)
			}
			return ts
		},
		worker: func(addr string) workerConfig {
			return workerConfig{Redis: cmp.Or(addr, testdb.RedisAddr()), Prefix: prefix, AllowVolatile: true}
		},
		wipe: func(t testing.TB) {
			t.Helper()
			// Only the test's keys: the Redis is shared.
			if n, err := testdb.DeleteRedisKeys(ctx, admin, prefix); err != nil || n == 0 {
				t.Fatalf("deleting the keys under %q: %d deleted, %v", prefix, n, err)
			}
		},
	}
}

// quiet is the logger for components whose logs the test does not read.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// eventually polls cond until it holds, failing the test after a deadline
// far beyond what the condition should need: it guards against a hang, it
// does not measure anything.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after a minute until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logRecorder is a slog.Handler keeping the messages logged, so a test can
// see what a background goroutine did.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}

// count returns how many messages contain s.
func (r *logRecorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// idSet records IDs in [1, max] as bits, reporting the first one seen twice.
type idSet struct {
	max  int64
	bits []uint64
	n    int64
}

func newIDSet(max int64) *idSet { return &idSet{max: max, bits: make([]uint64, max/64+1)} }

// add records id; it fails for an ID out of range or already recorded.
func (s *idSet) add(id int64) error {
	if id < 1 || id > s.max {
		return errors.New("out of range")
	}
	w, b := id/64, uint64(1)<<(id%64)
	if s.bits[w]&b != 0 {
		return errors.New("issued twice")
	}
	s.bits[w] |= b
	s.n++
	return nil
}
