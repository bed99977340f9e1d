package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/internal/wire"
)

func TestDerivedNames(t *testing.T) {
	for name, want := range map[string]bool{
		"invoice:20261127": true,
		"invoice:202611":   true,
		"invoice:2026":     true,
		"a:b:2026":         true,
		"invoice":          false,
		"invoice:2026x":    false,
		"invoice:20261":    false,
		"invoice-2026":     false,
		":2026":            false,
		"invoice:":         false,
		"order:1234567890": false,
	} {
		if got := derived(name); got != want {
			t.Errorf("derived(%q) = %v, want %v", name, got, want)
		}
	}
	for _, cfg := range []Settings{{Chains: []string{"order", "invoice:2026"}}, {Dated: map[string]string{"inv:202611": "I-{yyyy}-{seq:4}"}}} {
		cfg.Registry, cfg.Layout = testRegistry(t), newTestServer(t, nil).cfg.Layout
		if _, err := New(cfg); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "dated chains' periods") {
			t.Errorf("New with a derived name configured: %v; want ErrInvalidConfig saying why", err)
		}
	}
}

// records is a slog.Handler keeping every record's message and attrs.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}

// with returns the records of msg, each as its attrs.
func (h *records) with(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		m := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// Refusals are summed up per token and code, one line each per interval,
// and the audit lines of a token beyond its budget are counted in one.
func TestRefusalsSummedUp(t *testing.T) {
	logs := &records{}
	s := newTestServer(t, func(c *Settings) {
		c.tokens = twoTokens(t)
		c.Logger = slog.New(logs)
		c.logInterval = time.Hour // flushed by hand below
		c.auditBudget = 5
	})
	for i := range 500 {
		do(t, s, "GET", "/v1/ids", "Authorization", "Bearer wrong-token-0123456789")
		do(t, s, "GET", "/v1/ids/invoice:20261127", "Authorization", "Bearer "+tokA)
		if i < 20 {
			do(t, s, "GET", "/v1/ids/c"+string(rune('a'+i)), "Authorization", "Bearer "+tokB)
		}
	}
	if n := len(logs.with("idforge serve: requests refused")); n != 0 {
		t.Fatalf("%d refusal lines before the interval ended", n)
	}
	s.ledger.flush()
	got := map[string]string{}
	for _, a := range logs.with("idforge serve: requests refused") {
		got[a["token"]+" "+a["code"]] = a["count"]
	}
	if len(got) != 2 || got[" unauthorized"] != "500" || got["a forbidden"] != "500" {
		t.Errorf("refusal summaries %v; want 500 unauthorized without a token and 500 forbidden of a", got)
	}
	if n := len(logs.with("idforge serve: chain opened")); n != 5 {
		t.Errorf("%d chain-opened lines for 20 chains with a budget of 5", n)
	}
	if d := logs.with("idforge serve: audit lines dropped over the token's budget"); len(d) != 1 || d[0]["token"] != "b" || d[0]["count"] != "15" {
		t.Errorf("dropped audit lines: %v; want one line of b's 15", d)
	}
	// A new interval has a new budget.
	do(t, s, "GET", "/v1/ids/fresh", "Authorization", "Bearer "+tokB)
	if n := len(logs.with("idforge serve: chain opened")); n != 6 {
		t.Errorf("%d chain-opened lines after the interval; want 6", n)
	}
	// The counts are metrics too.
	if n := testCounter(t, s, "", "unauthorized"); n != 500 {
		t.Errorf("idforge_requests_refused_total{token=\"\",code=\"unauthorized\"} = %v; want 500", n)
	}
}

// testCounter reads a series of idforge_requests_refused_total.
func testCounter(t *testing.T, s *Server, token, code string) float64 {
	t.Helper()
	c, err := s.ledger.refusedTotal.GetMetricWithLabelValues(token, code)
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A refused claim changes nothing its holder's guards depend on: while the
// holder is live every other claim of its instance, of its token or
// another, is refused and the holder's guard goes on; the holder asking
// again with its secret goes to the store; a claim at the store keeps a
// second one out.
func TestClaimLeavesHolder(t *testing.T) {
	var l leases
	l.init()
	a, b := &caller{name: "a"}, &caller{name: "b"}
	k := leaseKey{"ns", "pod-0"}
	now := time.Now()
	cl, herr := l.claim(a, 10, k, "", true, 2*time.Second, time.Minute, leaseKey{}, now)
	if herr != nil {
		t.Fatal(herr)
	}
	if _, herr := l.claim(a, 10, k, "", true, 2*time.Second, time.Minute, leaseKey{}, now); herr == nil || herr.code != wire.CodeInstanceInUse {
		t.Fatalf("a claim while another is at the store: %+v", herr)
	}
	l.settle(cl, machine.State{MachineID: 3, Holder: "store-secret"}, nil, now)
	for i := range 100 {
		for _, c := range []*caller{a, b} {
			if _, herr := l.claim(c, 10, k, "guess", true, 2*time.Second, time.Minute, leaseKey{}, now); herr == nil || herr.code != wire.CodeInstanceInUse {
				t.Fatalf("claim %d of %s while the holder is live: %+v", i, c.name, herr)
			}
		}
		e, holder, herr := l.hold(a, k, 3, cl.secret)
		if herr != nil || holder != "store-secret" {
			t.Fatalf("the holder's guard after %d refused claims: %+v", i, herr)
		}
		l.done(k, e, false, nil, now)
	}
	again, herr := l.claim(a, 10, k, cl.secret, true, 2*time.Second, time.Minute, leaseKey{}, now)
	if herr != nil || again.secret == cl.secret {
		t.Fatalf("the holder asking again: %+v, %+v; want a claim under a new secret", again, herr)
	}
	l.settle(again, machine.State{}, engine.ErrInstanceInUse, now) // the store refused: nothing changes
	if _, _, herr := l.hold(a, k, 3, cl.secret); herr != nil {
		t.Fatalf("the holder's guard after its refused claim: %+v", herr)
	}
}

// The tokens file must be a regular file (a link to one will do); a FIFO
// is refused at once, not waited on.
func TestTokensFileKinds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte("a "+tokA+" chains=order,invoice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	toks, err := readTokens(link)
	if err != nil {
		t.Fatalf("a link to a regular file: %v", err)
	}
	if c := toks.callers[0]; !c.chains.allows("order") || c.chains.allows("other") {
		t.Errorf("chains=order,invoice: %+v", c.chains)
	}
	if _, err := readTokens(dir); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := readTokens(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("a FIFO: %v; want it refused as a FIFO", err)
		}
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("readTokens blocked on a FIFO")
	}
}

// Answers and the page never carry the store's own words.
func TestPublicErrors(t *testing.T) {
	internal := errors.Join(engine.ErrStoreUnavailable, errors.New("redisstore 10.0.0.5:6379 orders:{idf}: dial tcp 10.0.0.5:6379: refused"))
	s := newTestServer(t, nil)
	for _, e := range []*httpError{s.generatorError(nobody, "order", internal), proxyError(internal, &wire.MachineRequest{Namespace: "ns", Instance: "i"}, "")} {
		if strings.Contains(e.message, "10.0.0.5") || strings.Contains(e.message, "orders:") || e.status != http.StatusServiceUnavailable {
			t.Errorf("%d %s: %s; want 503 without the store's address", e.status, e.code, e.message)
		}
	}
	if got := pageError(internal.Error()); strings.Contains(got, "10.0.0.5") || !strings.Contains(got, engine.ErrStoreUnavailable.Error()) {
		t.Errorf("pageError = %q; want the engine's words only", got)
	}
	if got := notReady(errors.Join(errors.New("store: 10.0.0.5:6379"), internal)); got != "not ready: store: "+reason.StoreUnavailable+" (the server's log has the details)" {
		t.Errorf("notReady = %q", got)
	}
}
