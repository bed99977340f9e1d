package server

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/chain/chaintest"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/leased/leasetest"
	"github.com/idforge/idforge/internal/segtest"
)

// backing is a server-side store made of a machine distributor and a
// segment source.
type backing struct {
	machine.Distributor
	segment func(name string, _ ...engine.Floor) (segment.Distributor, error)
}

func (b backing) Segment(name string, _ ...engine.Floor) (segment.Distributor, error) {
	return b.segment(name)
}

// memSegments are in-memory sequences shared by name.
type memSegments struct {
	mu   sync.Mutex
	seqs map[string]*segtest.Fake
}

func (m *memSegments) Segment(name string, _ ...engine.Floor) (segment.Distributor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seqs == nil {
		m.seqs = map[string]*segtest.Fake{}
	}
	f, ok := m.seqs[name]
	if !ok {
		f = segtest.NewFake(0)
		m.seqs[name] = f
	}
	return f, nil
}

// serveProxy runs a proxy-enabled server on st (the engine/proxystore
// contracts run through it here, where the test may raise its step bound), configured further by
// opts, and returns a proxy store talking to it.
func serveProxy(t *testing.T, st idforge.Store, token string, opts ...func(*Settings)) *proxystore.Store {
	t.Helper()
	ps, _ := serveProxyAt(t, st, token, opts...)
	return ps
}

// serveProxyAt is serveProxy, also returning the server's URL.
func serveProxyAt(t *testing.T, st idforge.Store, token string, opts ...func(*Settings)) (*proxystore.Store, string) {
	t.Helper()
	// The contract's large step (2^40) is above the server's default bound.
	cfg := Settings{Registry: genreg.New(), Layout: snowflake.Default, Proxy: st, maxStep: 1 << 41}
	for _, o := range opts {
		o(&cfg)
	}
	if token != "" {
		toks, err := parseTokens(strings.NewReader("client " + token + " namespaces=* segments=*\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.tokens = toks
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ps, err := proxystore.New(proxystore.Settings{URL: ts.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return ps, ts.URL
}

// contractSafeGuard sets the server's reclaim cut-off to the machine
// contract's safe-guard, which the suite's fake clock runs past.
func contractSafeGuard(c *Settings) { c.safeGuard = time.Minute }

func TestMachineContractMemory(t *testing.T) {
	distributors := func(t *testing.T, c clock.Clock) machine.Distributor {
		segs := &memSegments{}
		return serveProxy(t, backing{machinetest.NewMemory(c), segs.Segment}, "", contractSafeGuard)
	}
	machinetest.Run(t, distributors)
	leasetest.Run(t, distributors)
}

func TestSegmentContractMemory(t *testing.T) {
	segs := &memSegments{}
	ps := serveProxy(t, backing{machinetest.NewMemory(clock.System), segs.Segment}, "")
	segments := func(t *testing.T, name string) segment.Distributor {
		d, err := ps.Segment(name)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	segmenttest.Run(t, segmenttest.Suite{Segments: segments})
	chaintest.Run(t, segments, 0)
}

// The same suites through a server on a real SQLite store.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "ids.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)") // the contract, not durability
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one writer: queue in the pool, not in SQLite's busy loop
	t.Cleanup(func() { db.Close() })
	return db
}

func sqliteBacking(t *testing.T, db *sql.DB, c clock.Clock) backing {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), db, sqlstore.Settings{CreateTables: true, Clock: c, ResetGrace: -1, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	return backing{st, st.Segment}
}

func TestMachineContractSQLite(t *testing.T) {
	db := openSQLite(t)
	distributors := func(t *testing.T, c clock.Clock) machine.Distributor {
		return serveProxy(t, sqliteBacking(t, db, c), "", contractSafeGuard)
	}
	machinetest.Run(t, distributors)
	leasetest.Run(t, distributors)
}

func TestSegmentContractSQLite(t *testing.T) {
	if raceEnabled {
		// 3,200 fetches through HTTP into the pure-Go SQLite outlast the
		// suite's 30 s under -race on 2 shared cores; the in-memory run
		// checks the proxy under the race detector, this one without it.
		t.Skip("pure-Go SQLite is too slow under -race for the suite's deadline")
	}
	db := openSQLite(t)
	ps := serveProxy(t, sqliteBacking(t, db, clock.System), "")
	segments := func(t *testing.T, name string) segment.Distributor {
		d, err := ps.Segment(name)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	segmenttest.Run(t, segmenttest.Suite{Segments: segments})
	chaintest.Run(t, segments, 0)
}

func TestTokensAndErrors(t *testing.T) {
	ctx := context.Background()
	segs := &memSegments{}
	ps, u := serveProxyAt(t, backing{machinetest.NewMemory(clock.System), segs.Segment}, "proxy-token-0123456789")
	inst := machine.Instance{Namespace: "ns", ID: "a"}
	st, err := ps.Distribute(ctx, inst, 10, 60e9)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Guard(ctx, machine.Instance{Namespace: "ns", ID: "b"}, st); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("Guard by a non-holder: %v", err)
	}

	// A proxy store without the token is refused, as a configuration error.
	bad, _ := proxystore.New(proxystore.Settings{URL: u})
	if _, err := bad.Distribute(ctx, inst, 10, 60e9); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("no token: %v", err)
	}
	// Nobody listening: store unavailable.
	gone, _ := proxystore.New(proxystore.Settings{URL: "http://127.0.0.1:1"})
	d, _ := gone.Segment("x")
	if _, err := d.NextMaxID(ctx, 10); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("no server: %v", err)
	}
	for _, u := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := proxystore.New(proxystore.Settings{URL: u}); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

// A chain the server does not serve (`serve -chains order,invoice`, asked
// for "other") is a refusal, not a store outage: NextID returns it at once,
// wrapping engine.ErrUnknownGenerator, instead of retrying until MaxWait.
// A name the server cannot take is refused the same way.
func TestRefusedChainFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	segs := &memSegments{}
	ps := serveProxy(t, backing{machinetest.NewMemory(clock.System), segs.Segment}, "",
		func(c *Settings) { c.Chains = []string{"order", "invoice"} })
	d, err := ps.Segment("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.NextMaxID(ctx, 10); !errors.Is(err, engine.ErrUnknownGenerator) || errors.Is(err, engine.ErrStoreUnavailable) ||
		!strings.Contains(err.Error(), "not served here") {
		t.Fatalf("NextMaxID of a chain the server does not serve: %v; want ErrUnknownGenerator and the server's words", err)
	}

	reg, err := idforge.New(ctx, idforge.Settings{Store: ps, Namespace: "svc", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.NextID(ctx, "chain", "order"); err != nil {
		t.Fatalf("a chain the server serves: %v", err)
	}
	// No deadline but the chain's MaxWait (10 s): only an immediate answer
	// leaves context.DeadlineExceeded out of the error.
	for _, name := range []string{"other", "other", "invoice-2026"} {
		_, err := reg.NextID(ctx, "chain", name)
		if !errors.Is(err, engine.ErrUnknownGenerator) || errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), name) {
			t.Fatalf("NextID of chain %q, refused by the server: %v; want ErrUnknownGenerator at once, naming the chain", name, err)
		}
	}
}

// Malformed proxy requests are 4xx with a JSON error.
func TestProxyBadBodies(t *testing.T) {
	segs := &memSegments{}
	h, _ := New(Settings{Registry: genreg.New(), Layout: snowflake.Default,
		Proxy: backing{machinetest.NewMemory(clock.System), segs.Segment}})
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/proxy/segments/next", `{"name":"a","step":0}`, 400},
		{"/v1/proxy/segments/next", `{"name":"a b","step":1}`, 400},
		{"/v1/proxy/segments/next", `{"name":"a","step":1,"x":1}`, 400},
		{"/v1/proxy/segments/next", `{"name":"a","step":1}{}`, 400},
		{"/v1/proxy/segments/next", `not json`, 400},
		{"/v1/proxy/segments/next", `{"name":"` + strings.Repeat("a", 5000) + `","step":1}`, 413},
		{"/v1/proxy/machines/distribute", `{"namespace":"","instance":"a","machine_bits":10,"safe_guard_ms":1000}`, 400},
		{"/v1/proxy/machines/distribute", `{"namespace":"n","instance":"a","machine_bits":99,"safe_guard_ms":1000}`, 400},
		{"/v1/proxy/machines/guard", `{"namespace":"n","instance":"a","machine_id":5}`, 409},
	} {
		req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %.60s: %d %s, want %d", c.path, c.body, rec.Code, rec.Body, c.status)
		}
	}
	// GET on a proxy route is 405.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/proxy/segments/next", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET proxy: %d", rec.Code)
	}
}

// The root registry runs on a proxy store like on any other store.
var _ idforge.Store = (*proxystore.Store)(nil)

func TestRegistryOnProxyStore(t *testing.T) {
	ctx := context.Background()
	segs := &memSegments{}
	ps := serveProxy(t, backing{machinetest.NewMemory(clock.System), segs.Segment}, "")
	a, err := idforge.New(ctx, idforge.Settings{Store: ps, Namespace: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := idforge.New(ctx, idforge.Settings{Store: ps, Namespace: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Stats().MachineID == b.Stats().MachineID {
		t.Fatalf("two registries on machine ID %d", a.Stats().MachineID)
	}
	seen := map[int64]bool{}
	for range 500 {
		for _, r := range []*idforge.Registry{a, b} {
			id, err := r.NextID(ctx, "chain", "order")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("chain ID %d twice", id)
			}
			seen[id] = true
		}
	}
	if _, err := a.NextID(ctx, "snowflake", ""); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseOutlivingServerResetGraceRefused: the server sends its store's
// reset grace with the machine ID, so a client lease without a reservation,
// which could issue for minutes after it lost the server, is refused by
// name and its machine ID given back; a default lease is accepted.
func TestLeaseOutlivingServerResetGraceRefused(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), openSQLite(t), sqlstore.Settings{CreateTables: true, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	ps := serveProxy(t, st, "")
	inst := machine.Instance{Namespace: "grace", ID: "a"}
	_, err = leased.Acquire(t.Context(), ps, inst, leased.LeaseSettings{Reservation: -1, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "not less than the store's ResetGrace 2s") {
		t.Fatalf("Acquire without a reservation = %v; want ErrInvalidConfig naming the server store's ResetGrace", err)
	}
	if got := ps.Terms().ResetGrace; got != 2*time.Second {
		t.Fatalf("ResetGrace = %v, want the server store's default 2s", got)
	}
	l, err := leased.Acquire(t.Context(), ps, machine.Instance{Namespace: "grace", ID: "b"}, leased.LeaseSettings{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Acquire with the defaults: %v", err)
	}
	defer l.Close()
	if l.MachineID() != 0 {
		t.Fatalf("the default lease got machine ID %d; want 0, given back by the refused one", l.MachineID())
	}
}

// TestProxyPassesRideThrough: the server sends its store's ride-through
// window with the machine ID, so a client lease reserves that far ahead in
// the server's store and refuses, by name, a SafeGuard too short to keep it,
// as a lease on the store itself would.
func TestProxyPassesRideThrough(t *testing.T) {
	const window = 60 * time.Second
	db := openSQLite(t)
	st, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{CreateTables: true, Init: true, RideThrough: window})
	if err != nil {
		t.Fatal(err)
	}
	ps := serveProxy(t, st, "")
	quiet := slog.New(slog.DiscardHandler)
	_, err = leased.Acquire(t.Context(), ps, machine.Instance{Namespace: "window", ID: "short"}, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute}, Logger: quiet})
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "RideThrough 1m0s") || !strings.Contains(err.Error(), "SafeGuard 1m0s") {
		t.Fatalf("Acquire with SafeGuard 1m under a 60 s window = %v; want ErrInvalidConfig naming both", err)
	}
	start := time.Now()
	l, err := leased.Acquire(t.Context(), ps, machine.Instance{Namespace: "window", ID: "a"}, leased.LeaseSettings{Logger: quiet})
	if err != nil {
		t.Fatalf("Acquire with the defaults: %v", err)
	}
	defer l.Close()
	if got := l.Reservation(); got != window {
		t.Fatalf("the client lease reserves %v, want the server store's window %v", got, window)
	}
	if got := ps.Terms().RideThrough; got != window {
		t.Fatalf("the proxy store's RideThrough = %v, want %v", got, window)
	}
	if got := ps.Terms().ResetGrace; got != window+time.Second {
		t.Fatalf("ResetGrace = %v, want the window plus 1 s", got)
	}
	if err := l.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	ad, err := sqlstore.OpenAdmin(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer ad.Close()
	ms, err := ad.Machines(t.Context(), "window")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		// The store keeps milliseconds: compare at that precision.
		if m.Instance.ID == "a" && m.LastTimestamp < start.Add(window).UnixMilli() {
			t.Fatalf("the server's store holds %v for the client lease, want a reservation %v ahead of %v",
				time.UnixMilli(m.LastTimestamp), window, start)
		}
	}
}
