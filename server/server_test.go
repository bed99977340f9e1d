package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/segtest"
	"github.com/idforge/idforge/internal/wire"
)

// testRegistry is a registry like the root builds: snowflake on machine 7,
// chains on in-memory sequences.
func testRegistry(t testing.TB) *genreg.Registry {
	t.Helper()
	reg := genreg.New()
	g, err := snowflake.New(7)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seqs := map[string]*segtest.Fake{}
	err = reg.RegisterFactory("chain", func(ctx context.Context, name string) (engine.Generator, error) {
		mu.Lock()
		f, ok := seqs[name]
		if !ok {
			f = segtest.NewFake(0)
			seqs[name] = f
		}
		mu.Unlock()
		return chain.New(f, segment.Settings{Step: 100}, chain.Owned{Name: name})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

func newTestServer(t testing.TB, mod func(*Settings)) *Server {
	t.Helper()
	cfg := Settings{Registry: testRegistry(t), Layout: snowflake.Default, machineID: func() int64 { return 7 }}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t testing.TB, h http.Handler, method, target string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.Host = "127.0.0.1:8080" // a server without tokens answers loopback names only
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func decodeIDs(t *testing.T, body string) []string {
	t.Helper()
	var v struct{ IDs []string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return v.IDs
}

func TestSnowflakeIDs(t *testing.T) {
	s := newTestServer(t, nil)
	res, body := do(t, s, "GET", "/v1/ids")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	ids := decodeIDs(t, body)
	if len(ids) != 1 {
		t.Fatalf("got %d IDs, want 1: %s", len(ids), body)
	}
	id, _ := strconv.ParseInt(ids[0], 10, 64)
	if _, machine, _, err := snowflake.Default.Decode(id); err != nil || machine != 7 {
		t.Fatalf("ID %s decodes to machine %d, %v", ids[0], machine, err)
	}

	_, body = do(t, s, "GET", "/v1/ids?count=10000")
	ids = decodeIDs(t, body)
	if len(ids) != 10000 {
		t.Fatalf("count=10000 gave %d IDs", len(ids))
	}
	seen := map[string]bool{}
	prev := int64(0)
	for _, s := range ids {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= prev || seen[s] {
			t.Fatalf("ID %q after %d: not a new, increasing ID", s, prev)
		}
		seen[s], prev = true, v
	}
}

func TestFormatsAndText(t *testing.T) {
	s := newTestServer(t, nil)
	// number: JSON numbers.
	_, body := do(t, s, "GET", "/v1/ids?count=3&format=number")
	var nums struct{ IDs []int64 }
	if err := json.Unmarshal([]byte(body), &nums); err != nil || len(nums.IDs) != 3 {
		t.Fatalf("format=number: %s: %v", body, err)
	}
	// text/plain: one a line, in each format; decode takes each back.
	for _, f := range []string{"decimal", "radix62", "radix36", "friendly"} {
		res, body := do(t, s, "GET", "/v1/ids?count=5&format="+f, "Accept", "text/plain")
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("%s: status %d %s: %s", f, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		if len(lines) != 5 {
			t.Fatalf("%s: %d lines: %q", f, len(lines), body)
		}
		res, body = do(t, s, "GET", "/v1/decode/"+lines[0]+"?format="+f)
		var d struct {
			Machine int64
			ID      string
		}
		if res.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil || d.Machine != 7 {
			t.Fatalf("%s: decode %s: %d %s", f, lines[0], res.StatusCode, body)
		}
	}
	// Accept negotiation.
	for accept, text := range map[string]bool{
		"":                                       false,
		"*/*":                                    false,
		"application/json":                       false,
		"text/plain":                             true,
		"text/plain;q=0.5, application/json":     false,
		"application/json;q=0.1, text/plain":     true,
		"text/html, text/plain;q=0.9, */*;q=0.8": true,
	} {
		if got := wantsText(accept); got != text {
			t.Errorf("wantsText(%q) = %v, want %v", accept, got, text)
		}
	}
}

// A radix ID decoded without ?format= is refused with a message that says
// how to name its format, and no refusal quotes strconv.
func TestDecodeErrors(t *testing.T) {
	s := newTestServer(t, nil)
	_, body := do(t, s, "GET", "/v1/ids?format=radix62")
	id := decodeIDs(t, body)[0]
	for target, want := range map[string]string{
		"/v1/decode/" + id:                     `id "` + id + `": not a decimal ID; for radix62 or radix36 IDs add ?format=radix62 or ?format=radix36`,
		"/v1/decode/" + id + "?format=decimal": `id "` + id + `": not a decimal ID; for radix62 or radix36 IDs add ?format=radix62 or ?format=radix36`,
		"/v1/decode/99999999999999999999":      `id "99999999999999999999": outside the 64-bit range`,
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Code != "bad_id" || e.Error != want {
			t.Errorf("GET %s: %d %s, want 400 bad_id %q", target, res.StatusCode, body, want)
		}
	}
	if res, body := do(t, s, "GET", "/v1/decode/"+id+"?format=radix62"); res.StatusCode != 200 {
		t.Errorf("decode with ?format=radix62: %d %s", res.StatusCode, body)
	}
}

func TestChains(t *testing.T) {
	s := newTestServer(t, nil)
	var all []string
	for range 3 {
		res, body := do(t, s, "GET", "/v1/ids/order?count=150")
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		all = append(all, decodeIDs(t, body)...)
	}
	for i, id := range all {
		if id != strconv.Itoa(i+1) {
			t.Fatalf("chain ID %d is %s, want %d", i, id, i+1)
		}
	}
	if res, body := do(t, s, "GET", "/v1/ids/order?format=friendly"); res.StatusCode != 400 {
		t.Fatalf("friendly chain ID: %d %s", res.StatusCode, body)
	}

	limited := newTestServer(t, func(c *Settings) { c.Chains = []string{"order"} })
	if res, body := do(t, limited, "GET", "/v1/ids/user"); res.StatusCode != 404 || !strings.Contains(body, "unknown_chain") {
		t.Fatalf("chain outside the allow-list: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, limited, "GET", "/v1/ids/order"); res.StatusCode != 200 {
		t.Fatalf("allowed chain: %d", res.StatusCode)
	}
}

func TestBadRequests(t *testing.T) {
	s := newTestServer(t, nil)
	for _, c := range []struct {
		method, target string
		status         int
		code           string
	}{
		{"GET", "/v1/ids?count=0", 400, "bad_count"},
		{"GET", "/v1/ids?count=1000000000", 400, "bad_count"},
		{"GET", "/v1/ids?count=10001", 400, "bad_count"},
		{"GET", "/v1/ids?count=-1", 400, "bad_count"},
		{"GET", "/v1/ids?count=+5", 400, "bad_count"},
		{"GET", "/v1/ids?count=abc", 400, "bad_count"},
		{"GET", "/v1/ids?count=", 400, "bad_count"},
		{"GET", "/v1/ids?format=hex", 400, "bad_format"},
		{"GET", "/v1/ids?size=3", 400, "bad_parameter"},
		{"GET", "/v1/ids/bad%20name", 400, "bad_chain"},
		{"GET", "/v1/ids/.hidden", 400, "bad_chain"},
		{"GET", "/v1/ids/" + strings.Repeat("x", 129), 400, "bad_chain"},
		{"GET", "/v1/decode/notanid", 400, "bad_id"},
		{"GET", "/v1/decode/-5", 400, "bad_id"},
		{"GET", "/v1/decode/99999999999999999999", 400, "bad_id"},
		{"GET", "/v1/decode/1-2", 400, "bad_id"},
		{"GET", "/v1/decode/123?format=zz", 400, "bad_format"},
		{"POST", "/v1/ids", 405, "method_not_allowed"},
		{"DELETE", "/v1/ids/order", 405, "method_not_allowed"},
		{"PUT", "/v1/layout", 405, "method_not_allowed"},
		{"GET", "/v2/ids", 404, "not_found"},
		{"GET", "/nothing", 404, "not_found"},
	} {
		res, body := do(t, s, c.method, c.target)
		var e errorBody
		if res.StatusCode != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Code != c.code || e.Error == "" {
			t.Errorf("%s %s: %d %q, want %d with code %s", c.method, c.target, res.StatusCode, body, c.status, c.code)
		}
		if res.StatusCode == 405 && res.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.target)
		}
	}
}

// HEAD draws no IDs: the ID routes refuse it like any method but GET, and
// the read-only routes answer it.
func TestHead(t *testing.T) {
	var drawn atomic.Int64
	count := testreg.Func(func(context.Context) (int64, error) { return drawn.Add(1), nil })
	reg := genreg.New()
	reg.Register("snowflake", "", count)
	reg.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) { return count, nil })
	s := newTestServer(t, func(c *Settings) { c.Registry = reg })
	for _, target := range []string{"/v1/ids", "/v1/ids?count=5", "/v1/ids/order"} {
		for _, method := range []string{"HEAD", "POST"} {
			res, body := do(t, s, method, target)
			var e errorBody
			if res.StatusCode != 405 || res.Header.Get("Allow") != "GET" || json.Unmarshal([]byte(body), &e) != nil || e.Code != "method_not_allowed" {
				t.Errorf("%s %s: %d, Allow %q, %s; want 405, Allow GET and a JSON error", method, target, res.StatusCode, res.Header.Get("Allow"), body)
			}
		}
	}
	if n := drawn.Load(); n != 0 {
		t.Errorf("HEAD and POST drew %d IDs", n)
	}
	for _, target := range []string{"/healthz", "/readyz", "/v1/layout", "/v1/decode/1"} {
		if res, _ := do(t, s, "HEAD", target); res.StatusCode != 200 {
			t.Errorf("HEAD %s: %d, want 200", target, res.StatusCode)
		}
	}
}

func TestLayoutHealthReady(t *testing.T) {
	notReady := false
	s := newTestServer(t, func(c *Settings) {
		c.readyInterval = time.Nanosecond // no caching: each probe checks
		c.Ready = func(context.Context) error {
			if notReady {
				return engine.ErrMachineIDLost
			}
			return nil
		}
	})
	res, body := do(t, s, "GET", "/v1/layout")
	var l layoutInfo
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &l) != nil || l.MachineBits != 10 || l.MachineID != 7 || l.Expiry == "" {
		t.Fatalf("layout: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, s, "GET", "/healthz"); res.StatusCode != 200 {
		t.Fatalf("healthz %d", res.StatusCode)
	}
	if res, _ := do(t, s, "GET", "/readyz"); res.StatusCode != 200 {
		t.Fatalf("readyz %d", res.StatusCode)
	}
	notReady = true
	if res, body := do(t, s, "GET", "/readyz"); res.StatusCode != 503 || !strings.Contains(body, "not_ready") {
		t.Fatalf("readyz when not ready: %d %s", res.StatusCode, body)
	}
}

// countHandler is a slog.Handler counting records by "LEVEL message".
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countHandler) WithGroup(string) slog.Handler            { return h }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Level.String()+" "+r.Message]++
	h.mu.Unlock()
	return nil
}

// A store outage seen by readiness checks is logged once when it starts
// and once when it ends, however many probes ask and however the error's
// text changes from check to check (a lease's refusal names the time).
func TestReadinessOutageLoggedOnce(t *testing.T) {
	logs := &countHandler{n: map[string]int{}}
	var checks atomic.Int64
	var down atomic.Bool
	s := newTestServer(t, func(c *Settings) {
		c.Logger = slog.New(logs)
		c.readyInterval = time.Nanosecond // every probe checks
		c.Ready = func(context.Context) error {
			if n := checks.Add(1); down.Load() {
				return fmt.Errorf("%w: check %d", engine.ErrStoreUnavailable, n)
			}
			return nil
		}
	})
	probe := func(want int) {
		t.Helper()
		if res, body := do(t, s, "GET", "/readyz"); res.StatusCode != want {
			t.Fatalf("readyz: %d %s, want %d", res.StatusCode, body, want)
		}
	}
	probe(200)
	down.Store(true)
	for range 50 {
		probe(503)
	}
	down.Store(false)
	probe(200)
	probe(200)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.n["WARN idforge serve: not ready"] != 1 || logs.n["INFO idforge serve: ready again"] != 1 {
		t.Fatalf("%d failed checks logged %v; want one not ready and one ready again", checks.Load(), logs.n)
	}
}

func TestTokens(t *testing.T) {
	toks, err := parseTokens(strings.NewReader("# callers\nbilling s3cr3t-billing-token\n  \nanonymous-token-0123456789\n"))
	if err != nil || toks.len() != 2 {
		t.Fatalf("ParseTokens: %v, %d", err, toks.len())
	}
	for _, bad := range []string{"", "# only a comment\n", "short\n", "a b c\n"} {
		if _, err := parseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("parseTokens(%q) accepted", bad)
		}
	}
	s := newTestServer(t, func(c *Settings) { c.tokens = toks })
	for hdr, want := range map[string]int{
		"":                                  401,
		"Bearer wrong-token-wrong-token":    401,
		"Basic s3cr3t-billing-token":        401,
		"Bearer s3cr3t-billing-token":       200,
		"bearer anonymous-token-0123456789": 200,
	} {
		res, body := do(t, s, "GET", "/v1/ids", "Authorization", hdr)
		if res.StatusCode != want {
			t.Errorf("Authorization %q: %d %s, want %d", hdr, res.StatusCode, body, want)
		}
	}
	// Health and readiness stay open for probes.
	if res, _ := do(t, s, "GET", "/healthz"); res.StatusCode != 200 {
		t.Errorf("healthz with tokens: %d", res.StatusCode)
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer s3cr3t-billing-token")
	if name, ok := toks.caller(req); !ok || name != "billing" {
		t.Errorf("Caller = %q, %v", name, ok)
	}
}

// A generator that fails answers 503 with a JSON error, never 500; a
// panicking one too.
func TestUnavailable(t *testing.T) {
	reg := genreg.New()
	reg.Register("snowflake", "", testreg.Func(func(context.Context) (int64, error) {
		return 0, engine.ErrMachineIDLost
	}))
	reg.RegisterFactory("chain", func(ctx context.Context, name string) (engine.Generator, error) {
		return testreg.Func(func(context.Context) (int64, error) { panic("boom") }), nil
	})
	s, err := New(Settings{Registry: reg, Layout: snowflake.Default})
	if err != nil {
		t.Fatal(err)
	}
	res, body := do(t, s, "GET", "/v1/ids")
	if res.StatusCode != 503 || !strings.Contains(body, "machine_id_lost") {
		t.Fatalf("lost lease: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "GET", "/v1/ids/x")
	if res.StatusCode != 503 || !strings.Contains(body, `"code":"internal"`) {
		t.Fatalf("panic: %d %s", res.StatusCode, body)
	}
}

// Unclean paths are redirected to the clean one in JSON, not the mux's HTML.
func TestUncleanPaths(t *testing.T) {
	s := newTestServer(t, nil)
	for target, loc := range map[string]string{
		"//v1/ids":              "/v1/ids",
		"/v1/../v1/ids?count=2": "/v1/ids?count=2",
		"/v1/./ids/order":       "/v1/ids/order",
		"/v1//decode/1":         "/v1/decode/1",
		"//nothing":             "/nothing",
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 307 || res.Header.Get("Location") != loc || json.Unmarshal([]byte(body), &e) != nil || e.Code != "redirect" {
			t.Errorf("GET %s: %d, Location %q, %s; want a JSON 307 to %s", target, res.StatusCode, res.Header.Get("Location"), body, loc)
		}
	}
}

// What net/http refuses before the server sees it gets net/http's plain
// text, as the README says; everything else is JSON.
func TestRefusedByNetHTTP(t *testing.T) {
	ts := startHTTPServer(t)
	host := "Host: 127.0.0.1\r\n"
	for _, tt := range []struct {
		request string
		status  int
		json    bool
	}{
		{"garbage\r\n\r\n", 400, false},
		{"GET /v1/ids HTTP/1.1\r\n\r\n", 400, false},
		{"GET /v1/ids HTTP/1.1\r\n" + host + "Bad Header: y\r\n\r\n", 400, false},
		{"GET /v1/ids HTTP/1.1\r\n" + host + "X: " + strings.Repeat("a", 19<<10) + "\r\n\r\n", 200, true},
		{"GET /v1/ids HTTP/1.1\r\n" + host + "X: " + strings.Repeat("a", 21<<10) + "\r\n\r\n", 431, false},
		{"GET /v1/ids HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", 501, false},
		{"GET /v1/ids HTTP/1.1\r\n" + host + "Expect: nothing\r\n\r\n", 417, false},
		{"GET /v1/ids HTTP/2.0\r\n" + host + "\r\n", 505, false},
		{"GET /v1/ids?count=x HTTP/1.1\r\n" + host + "\r\n", 400, true},
	} {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(tt.request))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%.60q: %v", tt.request, err)
		}
		isJSON := res.Header.Get("Content-Type") == "application/json"
		if res.StatusCode != tt.status || isJSON != tt.json {
			t.Errorf("%.60q: %d %s, want %d, JSON %v", tt.request, res.StatusCode, res.Header.Get("Content-Type"), tt.status, tt.json)
		}
		c.Close()
	}
}

// startHTTPServer serves a test server over a real listener with
// NewHTTPServer's limits and timeouts.
func startHTTPServer(t *testing.T) *httptest.Server {
	s := newTestServer(t, nil)
	ts := httptest.NewUnstartedServer(s)
	ts.Config = NewHTTPServer("", s)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// Over a real listener with the server's timeouts.
func TestHTTPServer(t *testing.T) {
	ts := startHTTPServer(t)
	res, err := http.Get(ts.URL + "/v1/ids?count=2")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || len(decodeIDs(t, string(b))) != 2 {
		t.Fatalf("%d %s", res.StatusCode, b)
	}
}

func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	reg := genreg.New()
	reg.Register("snowflake", "", testreg.Func(func(context.Context) (int64, error) {
		entered <- struct{}{}
		<-release
		return 1, nil
	}))
	s, _ := New(Settings{Registry: reg, Layout: snowflake.Default, maxInFlight: 2})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { do(t, s, "GET", "/v1/ids") })
	}
	<-entered
	<-entered
	res, body := do(t, s, "GET", "/v1/ids")
	if res.StatusCode != 429 || !strings.Contains(body, "busy") {
		t.Errorf("third request: %d %s", res.StatusCode, body)
	}
	close(release)
	wg.Wait()
	if res, _ := do(t, s, "GET", "/healthz"); res.StatusCode != 200 {
		t.Errorf("after the burst: %d", res.StatusCode)
	}
}

// A store reset ends the lease, whose error then wraps a lost machine ID too:
// the answer names the reset.
func TestGeneratorErrorResetFirst(t *testing.T) {
	err := fmt.Errorf("%w: machine: lease: %w", engine.ErrMachineIDLost, engine.ErrStoreReset)
	if e := newTestServer(t, nil).generatorError(nobody, "", err); e.status != http.StatusServiceUnavailable || e.code != "store_reset" {
		t.Fatalf("generatorError(lost+reset) = %d %q, want 503 store_reset", e.status, e.code)
	}
}

// Without an allow-list at most wire.MaxChains names are served, however many
// first requests for new names arrive at once; a served name keeps working.
func TestMaxChainsUnderConcurrency(t *testing.T) {
	s := newTestServer(t, nil)
	const names = wire.MaxChains + 64
	codes := make([]int, names)
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			res, _ := do(t, s, "GET", "/v1/ids/c"+strconv.Itoa(i))
			codes[i] = res.StatusCode
		})
	}
	wg.Wait()
	served, refused := 0, 0
	for i, c := range codes {
		switch c {
		case 200:
			served++
			if res, body := do(t, s, "GET", "/v1/ids/c"+strconv.Itoa(i)); res.StatusCode != 200 {
				t.Fatalf("served chain c%d then refused: %d %s", i, res.StatusCode, body)
			}
		case 429:
			refused++
		default:
			t.Fatalf("chain c%d: status %d", i, c)
		}
	}
	if served != wire.MaxChains || refused != names-wire.MaxChains {
		t.Fatalf("%d served, %d refused; want %d and %d", served, refused, wire.MaxChains, names-wire.MaxChains)
	}
	if res, body := do(t, s, "GET", "/v1/ids/another"); res.StatusCode != 429 || !strings.Contains(body, "too_many_chains") {
		t.Fatalf("a new name past the limit: %d %s", res.StatusCode, body)
	}
}
