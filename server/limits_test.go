package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
)

const (
	tokA = "token-a-0123456789"
	tokB = "token-b-0123456789"
)

func twoTokens(t testing.TB) *tokenSet {
	t.Helper()
	toks, err := parseTokens(strings.NewReader("a " + tokA + "\nb " + tokB + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// blocking is a provider whose snowflake generator blocks until release
// is closed, reporting each caller on entered.
func blocking(t testing.TB) (reg *genreg.Registry, entered chan struct{}, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}, 64), make(chan struct{})
	reg = genreg.New()
	reg.Register("snowflake", "", testreg.Func(func(context.Context) (int64, error) {
		entered <- struct{}{}
		<-release
		return 1, nil
	}))
	return reg, entered, release
}

// Repeated query parameters are refused, not resolved by a guess.
func TestRepeatedParameters(t *testing.T) {
	s := newTestServer(t, nil)
	for _, target := range []string{
		"/v1/ids?count=3&count=4",
		"/v1/ids?format=number&count=2&format=decimal",
		"/v1/ids/order?count=1&count=1",
		"/v1/decode/1?format=decimal&format=number",
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Code != "bad_parameter" || !strings.Contains(e.Error, "more than once") {
			t.Errorf("GET %s: %d %s; want 400 bad_parameter", target, res.StatusCode, body)
		}
	}
}

// A refusal quotes a bad value whole when it is short, and not at all
// when it is long: never cut to look like another value.
func TestBoundedEcho(t *testing.T) {
	s := newTestServer(t, nil)
	digits23 := "12345678901234567890123"
	long := strings.Repeat("9", 100)
	for target, want := range map[string]string{
		"/v1/ids?count=" + digits23:                     `count="` + digits23 + `"`,
		"/v1/ids?count=" + long:                         "count=(100 bytes, not shown)",
		"/v1/ids/" + strings.Repeat("x", 10000):         "chain name (10000 bytes, not shown)",
		"/v1/ids?format=" + long:                        "unknown format (100 bytes, not shown)",
		"/v1/ids?" + strings.Repeat("k", 100) + "=1":    "unknown parameter (100 bytes, not shown)",
		"/v1/decode/" + long:                            "id (100 bytes, not shown)",
		"/v1/decode/" + long + "?format=radix62":        "id (100 bytes, not shown)",
		"/v1/decode/" + strings.Repeat("z", 70) + "-1-": "id (73 bytes, not shown)",
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, want) || len(body) > 400 {
			t.Errorf("GET %.60s: %d %s; want 400 saying %s", target, res.StatusCode, body, want)
		}
	}
}

// Anonymous probes say ok or not; token holders get the details.
func TestProbesSayLittle(t *testing.T) {
	internals := errors.New("store: 10.0.0.5:3306 (prefix idforge_): lease of instance serve-0, machine ID 7: connection refused")
	s := newTestServer(t, func(c *Settings) {
		c.tokens = twoTokens(t)
		c.Ready = func(context.Context) error { return internals }
	})
	for path, want := range map[string]string{
		"/readyz":  `{"error":"not ready","code":"not_ready"}` + "\n",
		"/healthz": `{"status":"ok"}` + "\n",
	} {
		if _, body := do(t, s, "GET", path); body != want {
			t.Errorf("anonymous %s: %q; want %q", path, body, want)
		}
	}
	// A token holder gets the reason, and nothing of the store's address or
	// key prefix, which the log has.
	if res, body := do(t, s, "GET", "/readyz", "Authorization", "Bearer "+tokA); res.StatusCode != 503 || !strings.Contains(body, "not ready: store: other") ||
		strings.Contains(body, "10.0.0.5") || strings.Contains(body, "idforge_") {
		t.Errorf("readyz with a token: %d %s; want the reason without the store's address", res.StatusCode, body)
	}
	if _, body := do(t, s, "GET", "/healthz", "Authorization", "Bearer "+tokA); !strings.Contains(body, "uptime_seconds") {
		t.Errorf("healthz with a token: %s", body)
	}
}

// Probes share one readiness check per interval, however many arrive.
func TestReadinessCached(t *testing.T) {
	var calls atomic.Int64
	s := newTestServer(t, func(c *Settings) {
		c.readyInterval = time.Hour
		c.Ready = func(context.Context) error { calls.Add(1); return nil }
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if res, _ := do(t, s, "GET", "/readyz"); res.StatusCode != 200 {
				t.Errorf("readyz: %d", res.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("50 probes checked readiness %d times; want 1", n)
	}
}

// Probes are answered when every request slot is taken, and one token's
// requests in flight leave another's served.
func TestProbesAndTokensOutsideAFlood(t *testing.T) {
	reg, entered, release := blocking(t)
	s := newTestServer(t, func(c *Settings) {
		c.Registry, c.tokens, c.maxInFlightPerToken, c.maxInFlight = reg, twoTokens(t), 2, 3
	})
	var wg sync.WaitGroup
	defer func() { close(release); wg.Wait() }()
	for range 2 {
		wg.Go(func() { do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokA) })
	}
	<-entered
	<-entered
	if res, body := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokA); res.StatusCode != 429 || !strings.Contains(body, "this token has 2 requests in flight") {
		t.Errorf("token a's third request: %d %s; want 429", res.StatusCode, body)
	}
	wg.Go(func() { do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokB) })
	<-entered // token b is served while a is at its limit
	if res, body := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokB); res.StatusCode != 429 || !strings.Contains(body, "more than 3 requests in flight") {
		t.Errorf("a request past MaxInFlight: %d %s; want 429", res.StatusCode, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if res, body := do(t, s, "GET", path); res.StatusCode != 200 {
			t.Errorf("%s with every slot taken: %d %s", path, res.StatusCode, body)
		}
	}
}

// serveLoopback serves s with NewHTTPServer on a loopback listener.
func serveLoopback(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer("", s)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawGet sends a GET of path with token on c and reads the answer's status.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path, token string) (*http.Response, error) {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(br, nil)
	if err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	return res, err
}

// A token's connections past MaxConnsPerToken are answered 429 and closed;
// another token's are not counted against it.
func TestMaxConnsPerToken(t *testing.T) {
	s := newTestServer(t, func(c *Settings) { c.tokens, c.maxConnsPerToken = twoTokens(t), 2 })
	addr := serveLoopback(t, s)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	for i := range 2 {
		c, br := dial()
		if res, err := rawGet(t, c, br, "/v1/ids", tokA); err != nil || res.StatusCode != 200 {
			t.Fatalf("token a's connection %d: %v %v", i, res, err)
		}
	}
	c, br := dial()
	res, err := rawGet(t, c, br, "/v1/ids", tokA)
	if err != nil || res.StatusCode != 429 || !res.Close {
		t.Fatalf("token a's third connection: %v, %v; want 429 and the connection closed", res, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the third connection stays open: %v", err)
	}
	c, br = dial()
	if res, err := rawGet(t, c, br, "/v1/ids", tokB); err != nil || res.StatusCode != 200 {
		t.Errorf("token b: %v, %v", res, err)
	}
}

// Past MaxConns a new connection closes the oldest that sent no valid
// token yet, so connections that never finish their headers cannot keep
// a probe out.
func TestMaxConnsEvictsSlowAnonymous(t *testing.T) {
	s := newTestServer(t, func(c *Settings) { c.maxConns = 4 })
	addr := serveLoopback(t, s)
	var slow []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET /v1/ids HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
		slow = append(slow, c)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		res, err := client.Get("http://" + addr + "/healthz")
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("probe %d with slow connections past MaxConns: %v, %v", i, res, err)
		}
		res.Body.Close()
	}
	// The oldest slow connections were closed: the client reads EOF, or a
	// reset when the server closed with the partial request unread.
	slow[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow[0].Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the oldest slow connection: %v; want it closed", err)
	}
}

func TestSettingsValidation(t *testing.T) {
	for field, mod := range map[string]func(*Settings){
		"maxInFlight":         func(c *Settings) { c.maxInFlight = -1 },
		"maxInFlightPerToken": func(c *Settings) { c.maxInFlightPerToken = -1 },
		"maxConns":            func(c *Settings) { c.maxConns = -1 },
		"maxConnsPerToken":    func(c *Settings) { c.maxConnsPerToken = -1 },
		"maxMachinesPerToken": func(c *Settings) { c.maxMachinesPerToken = -1 },
		"maxStep":             func(c *Settings) { c.maxStep = -1 },
		"maxTimestampAhead":   func(c *Settings) { c.maxTimestampAhead = -time.Second },
		"readyInterval":       func(c *Settings) { c.readyInterval = -time.Second },
		"AllowedHosts":        func(c *Settings) { c.AllowedHosts = []string{"ids.internal:8080"} },
		"Layout":              func(c *Settings) { c.Layout = snowflake.Layout{} },
		"Registry":            func(c *Settings) { c.Registry = nil },
	} {
		cfg := Settings{Registry: genreg.New(), Layout: snowflake.Default}
		mod(&cfg)
		if _, err := New(cfg); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Settings."+field) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming Settings.%s", field, err, field)
		}
	}
	s := newTestServer(t, nil)
	if s.cfg.maxStep != defaultMaxStep || s.cfg.maxConns != defaultMaxConns || s.cfg.readyInterval != defaultReadyInterval {
		t.Errorf("defaults not filled in: %+v", s.cfg)
	}
}

func TestTokenOptions(t *testing.T) {
	toks, err := parseTokens(strings.NewReader("orders " + tokA + " namespaces=orders,jobs segments=* machines=8\nplain " + tokB + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	o, p := toks.callers[0], toks.callers[1]
	if !o.namespaces.allows("jobs") || o.namespaces.allows("billing") || !o.segments.allows("anything") || o.machines != 8 {
		t.Errorf("orders: %+v", o)
	}
	if p.namespaces.allows("orders") || p.segments.allows("order") || p.machines != 0 {
		t.Errorf("a token without options may use the proxy: %+v", p)
	}
	for bad, want := range map[string]string{
		"a " + tokA + "\na " + tokB + "\n":             `name "a" repeated`,
		"a " + tokA + "\nb " + tokA + "\n":             "a token repeated",
		"a " + tokA + " colour=red\n":                  `unknown option "colour"`,
		"a " + tokA + " machines=0\n":                  "machines=0",
		"a " + tokA + " namespaces=a,b namespaces=c\n": `option "namespaces" given twice`,
		"a " + tokA + " secret-part\n":                 "field 3 is no option",
		"a " + tokA + " namespaces=bad\x00name\n":      "name",
		"a " + tokA + " segments=,\n":                  `name ""`,
	} {
		if _, err := parseTokens(strings.NewReader(bad)); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTokens(%q) = %v; want ErrInvalidConfig saying %s", bad, err, want)
		}
	}

	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("a "+tokA+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if _, err := readTokens(path); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a tokens file of mode 644: %v; want it refused", err)
	}
	os.Chmod(path, 0o600)
	if _, err := readTokens(path); err != nil {
		t.Errorf("a tokens file of mode 600: %v", err)
	}
}

// setTokens takes effect for the next request; nil is refused.
func TestSetTokens(t *testing.T) {
	s := newTestServer(t, func(c *Settings) { c.tokens = twoTokens(t) })
	if err := s.setTokens(nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("setTokens(nil): %v", err)
	}
	toks, _ := parseTokens(strings.NewReader("c token-c-0123456789\n"))
	if err := s.setTokens(toks); err != nil {
		t.Fatal(err)
	}
	if res, _ := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokA); res.StatusCode != 401 {
		t.Errorf("a removed token: %d", res.StatusCode)
	}
	if res, _ := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer token-c-0123456789"); res.StatusCode != 200 {
		t.Errorf("a new token: %d", res.StatusCode)
	}
}

// New reads Settings.TokensFile, refusing a bad one by the field's name;
// ReloadTokens reads it again, keeping the tokens in force when the file
// has gone bad.
func TestTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("a "+tokA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Settings{Registry: testRegistry(t), Layout: snowflake.Default, TokensFile: path + ".missing"}); !errors.Is(err, engine.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "Settings.TokensFile") {
		t.Errorf("New with a missing tokens file: %v; want ErrInvalidConfig naming Settings.TokensFile", err)
	}
	s := newTestServer(t, func(c *Settings) { c.TokensFile = path })
	if res, _ := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokA); res.StatusCode != 200 {
		t.Errorf("a token of the file: %d", res.StatusCode)
	}
	if err := os.WriteFile(path, []byte("b "+tokB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	if res, _ := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokA); res.StatusCode != 401 {
		t.Errorf("a token removed from the file: %d", res.StatusCode)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTokens(); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("ReloadTokens of an empty file: %v; want ErrInvalidConfig", err)
	}
	if res, _ := do(t, s, "GET", "/v1/ids", "Authorization", "Bearer "+tokB); res.StatusCode != 200 {
		t.Errorf("after a refused reload, a token in force: %d", res.StatusCode)
	}
	if err := newTestServer(t, nil).ReloadTokens(); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("ReloadTokens without a tokens file: %v", err)
	}
}

// A server without tokens answers loopback names in every spelling.
func TestLoopbackHosts(t *testing.T) {
	s := newTestServer(t, nil)
	for host, want := range map[string]int{
		"127.0.0.1":        200,
		"127.0.0.2:8080":   200,
		"[::1]:8080":       200,
		"localhost":        200,
		"LOCALHOST.:8080":  200,
		"localhost.evil":   403,
		"10.0.0.5:8080":    403,
		"127.0.0.1.nip.io": 403,
	} {
		req, _ := http.NewRequest("GET", "/v1/ids", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}
