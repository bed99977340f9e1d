package redisstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/tests/testdb"
)

// created is the creation time an epoch token records.
func created(t *testing.T, token string) time.Time {
	t.Helper()
	ms, _, ok := strings.Cut(token, ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		t.Fatalf("epoch token %q does not start with its creation time", token)
	}
	return time.UnixMilli(n)
}

// openOn opens a store on srv with the default reset grace, timed by c.
func openOn(t *testing.T, srv *testdb.RedisServer, c clock.Clock, opts ...redisstore.Settings) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(t.Context(), srv.Client(t), with(redisstore.Settings{
		Prefix: "{app}:", Clock: c, AllowVolatile: true}, opts...))
	if err != nil {
		t.Fatalf("Open on %v: %v", srv, err)
	}
	return s
}

// waitedGrace fails the test unless clock c (a fake that advances when
// slept on) has passed the store's epoch creation plus the default grace.
func waitedGrace(t *testing.T, what string, s *redisstore.Store, c *clocktest.Fake) {
	t.Helper()
	readyAt := created(t, s.Epoch()).Add(redisstore.DefaultResetGrace)
	if c.Sleeps() == 0 || c.Now().Before(readyAt) {
		t.Fatalf("%s: clock at %v after %d sleeps; want it slept past the epoch's creation + grace, %v", what, c.Now(), c.Sleeps(), readyAt)
	}
}

// TestVolatileRestartIsAReset restarts a Redis without persistence (SHUTDOWN
// NOSAVE, started again empty) under a store that used it: every operation
// of that store fails once with ErrStoreReset naming the store, it then
// waits the grace of the new epoch, and its segments come back above every
// range it held; a fresh store opened after the wipe waits the grace too.
func TestVolatileRestartIsAReset(t *testing.T) {
	ctx := t.Context()
	srv := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	clkA := clocktest.NewFake(time.Now())
	a := openOn(t, srv, clkA, redisstore.Settings{Init: true})
	// Declared brand-new: nothing to wait for.
	if clkA.Sleeps() != 0 || !redisstore.AdminOf(a).BrandNew() {
		t.Fatalf("Open with Init on an empty Redis: %d sleeps, brand-new %v; want no wait, brand-new", clkA.Sleeps(), redisstore.AdminOf(a).BrandNew())
	}
	oldEpoch := a.Epoch()

	inst := machine.Instance{Namespace: "svc", ID: "a"}
	st, err := a.Distribute(ctx, inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	order, other := segmentOf(t, a, "order"), segmentOf(t, a, "other")
	var floor int64
	for range 3 {
		if floor, err = order.NextMaxID(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	otherFloor, err := other.NextMaxID(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.ShutdownNoSave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// A process started right after the restart: no epoch, so it creates
	// one and waits the grace before handing anything out.
	clkB := clocktest.NewFake(clkA.Now())
	b := openOn(t, srv, clkB)
	waitedGrace(t, "Open after the wipe", b, clkB)
	if b.Epoch() == oldEpoch {
		t.Fatal("the wiped Redis kept its epoch")
	}

	// The old process notices at its next heartbeat...
	err = a.Guard(ctx, inst, st)
	if !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), "redisstore "+srv.Addr()) || !strings.Contains(err.Error(), oldEpoch) {
		t.Fatalf("heartbeat after the wipe: %v; want ErrStoreReset naming the store and the old epoch", err)
	}
	if a.Epoch() != b.Epoch() {
		t.Fatalf("the old process adopted epoch %q, the store has %q", a.Epoch(), b.Epoch())
	}
	// ...and its segments resume above what it held (the floors were
	// re-seeded on adoption), as do the new process's.
	got, err := order.NextMaxID(ctx, 100)
	if err != nil || got <= floor {
		t.Fatalf("old process's fetch after the reset: %d, %v; want > %d", got, err, floor)
	}
	fresh, err := segmentOf(t, b, "other").NextMaxID(ctx, 10)
	if err != nil || fresh <= otherFloor {
		t.Fatalf("new process's fetch: %d, %v; want above the old process's floor %d", fresh, err, otherFloor)
	}
	// The old machine ID is gone with the epoch.
	if err := a.Guard(ctx, inst, st); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("second heartbeat of the old lease: %v; want ErrMachineIDLost", err)
	}
}

// TestFirstOperationAfterWipeFails: a segment fetch is the first to see the
// wipe; it fails with ErrStoreReset (the chain drops what it holds) instead
// of handing out a range of the new epoch, and the next fetch, after the
// grace, is above the floor.
func TestFirstOperationAfterWipeFails(t *testing.T) {
	ctx := t.Context()
	srv := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	clk := clocktest.NewFake(time.Now())
	s := openOn(t, srv, clk, redisstore.Settings{Start: 0, Init: true})
	d := segmentOf(t, s, "order")
	floor, err := d.NextMaxID(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil { // our own server
		t.Fatal(err)
	}
	if _, err := d.NextMaxID(ctx, 50); !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("first fetch after FLUSHALL: %v; want ErrStoreReset", err)
	}
	sleeps := clk.Sleeps()
	got, err := d.NextMaxID(ctx, 50)
	if err != nil || got != floor+50 {
		t.Fatalf("fetch after the reset: %d, %v; want %d (the floor %d, then one step)", got, err, floor+50, floor)
	}
	if clk.Sleeps() == sleeps {
		t.Fatal("the fetch after the reset did not wait the grace")
	}
	if _, err := s.Distribute(ctx, machine.Instance{Namespace: "svc", ID: "new"}, 10, time.Minute); err != nil {
		t.Fatalf("Distribute after the grace: %v", err)
	}
}

// TestDurableCrashKeepsEpoch: a Redis with appendonly yes and appendfsync
// always killed with SIGKILL comes back from its AOF with the same epoch,
// machine IDs and counters: no reset, no grace.
func TestDurableCrashKeepsEpoch(t *testing.T) {
	ctx := t.Context()
	srv := testdb.StartRedisServer(t, testdb.RedisDurable()...)
	var logs bytes.Buffer
	clk := clocktest.NewFake(time.Now())
	s, err := redisstore.Open(ctx, srv.Client(t), redisstore.Settings{Prefix: "{app}:", Clock: clk, Init: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("Open on %v: %v", srv, err)
	}
	if logs.Len() > 0 {
		t.Errorf("Open on appendfsync always logged a warning: %s", logs.String())
	}
	inst := machine.Instance{Namespace: "svc", ID: "a"}
	st, err := s.Distribute(ctx, inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d := segmentOf(t, s, "order")
	before, err := d.NextMaxID(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	if err := s.Guard(ctx, inst, st); err != nil {
		t.Fatalf("heartbeat after kill -9 and restart: %v", err)
	}
	if got, err := d.NextMaxID(ctx, 10); err != nil || got != before+10 {
		t.Fatalf("fetch after kill -9 and restart: %d, %v; want %d", got, err, before+10)
	}
	clk2 := clocktest.NewFake(time.Now().Add(time.Hour))
	again := openOn(t, srv, clk2)
	if again.Epoch() != s.Epoch() || clk2.Sleeps() != 0 {
		t.Fatalf("a store opened after the crash: epoch %q (want %q), %d sleeps (want 0)", again.Epoch(), s.Epoch(), clk2.Sleeps())
	}
}

// TestPersistenceCheck: no AOF and no RDB is refused unless AllowVolatile;
// a window in which acknowledged writes can be lost unseen is a warning
// that names it.
func TestPersistenceCheck(t *testing.T) {
	ctx := t.Context()
	vol := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	_, err := redisstore.Open(ctx, vol.Client(t), redisstore.Settings{ResetGrace: -1})
	if !errors.Is(err, redisstore.ErrVolatile) || !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "AllowVolatile") || !strings.Contains(err.Error(), vol.Addr()) {
		t.Fatalf("Open on a volatile Redis: %v; want ErrVolatile and ErrInvalidConfig naming the server and AllowVolatile", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}, "appendfsync everysec"},
		{[]string{"--save", "", "--appendonly", "yes", "--appendfsync", "no"}, "up to about 30 s"},
		{[]string{"--save", "3600 1", "--appendonly", "no"}, "RDB snapshots only"},
	} {
		srv := testdb.StartRedisServer(t, tc.args...)
		var logs bytes.Buffer
		_, err := redisstore.Open(ctx, srv.Client(t), redisstore.Settings{ResetGrace: -1,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("%v: the log does not warn about %q:\n%s", tc.args, tc.want, logs.String())
		}
	}
}

// TestEvictionRefused: a Redis that may evict keys without a TTL
// (allkeys-* with a maxmemory) is refused, AllowVolatile or not, also where
// CONFIG is disabled; without a maxmemory, or with a volatile-* policy (our
// keys have no TTL), nothing is evicted and it is accepted.
func TestEvictionRefused(t *testing.T) {
	durable := testdb.RedisDurable()
	for _, tc := range []struct {
		args    []string
		refused bool
	}{
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}, true},
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-random", "--rename-command", "CONFIG", ""}, true},
		{[]string{"--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"}, false},
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"}, false},
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "noeviction"}, false},
	} {
		srv := testdb.StartRedisServer(t, append(slices.Clone(durable), tc.args...)...)
		_, err := redisstore.Open(t.Context(), srv.Client(t), redisstore.Settings{ResetGrace: -1, AllowVolatile: true,
			Logger: slog.New(slog.DiscardHandler)})
		if !tc.refused {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "maxmemory-policy "+tc.args[3]) || !strings.Contains(err.Error(), srv.Addr()) {
			t.Errorf("%v: Open = %v; want ErrInvalidConfig naming the policy and the node", tc.args, err)
		}
	}
}

// TestPersistenceWithoutConfig: where CONFIG is disabled (managed services
// rename it) Open falls back to INFO persistence, which shows AOF but not its
// fsync policy nor the snapshot rules: a warning, not a refusal.
func TestPersistenceWithoutConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--rename-command", "CONFIG", ""}, "appendfsync unreadable"},
		{[]string{"--save", "", "--appendonly", "no", "--rename-command", "CONFIG", ""}, "cannot be read"},
	} {
		srv := testdb.StartRedisServer(t, tc.args...)
		var logs bytes.Buffer
		_, err := redisstore.Open(t.Context(), srv.Client(t), redisstore.Settings{ResetGrace: -1,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("%v: the log does not warn %q:\n%s", tc.args, tc.want, logs.String())
		}
	}
}

// TestSnapshotRollbackIsAReset: a Redis that comes back from an old RDB
// snapshot has the same epoch but counters that went back. The first
// process whose floor is above a counter replaces the epoch, so it and
// every other process see a reset, and nothing is handed out below what was
// handed out before.
func TestSnapshotRollbackIsAReset(t *testing.T) {
	ctx := t.Context()
	srv := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	clkA, clkB := clocktest.NewFake(time.Now()), clocktest.NewFake(time.Now())
	a := openOn(t, srv, clkA, redisstore.Settings{Init: true})
	b := openOn(t, srv, clkB)
	old := a.Epoch()
	order := segmentOf(t, a, "order")
	if _, err := order.NextMaxID(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Save(ctx).Err(); err != nil { // the snapshot the restart will load
		t.Fatal(err)
	}
	var floor int64
	for range 2 {
		var err error
		if floor, err = order.NextMaxID(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	_, err := order.NextMaxID(ctx, 100)
	if !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), "lost acknowledged writes") {
		t.Fatalf("fetch after the rollback: %v; want ErrStoreReset saying the store lost writes", err)
	}
	if a.Epoch() == old {
		t.Fatal("the epoch was not replaced")
	}
	if _, err := segmentOf(t, b, "other").NextMaxID(ctx, 1); !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("another process after the rollback: %v; want ErrStoreReset", err)
	}
	sleeps := clkA.Sleeps()
	if got, err := order.NextMaxID(ctx, 100); err != nil || got != floor+100 {
		t.Fatalf("fetch after the reset: %d, %v; want %d, above the floor %d", got, err, floor+100, floor)
	}
	if clkA.Sleeps() == sleeps {
		t.Fatal("the fetch after the reset did not wait the grace")
	}
}
