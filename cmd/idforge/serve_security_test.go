package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/wire"
	"github.com/idforge/idforge/tests/faultproxy"
	"github.com/idforge/idforge/tests/testdb"
)

// Tokens of the security tests: alice and bob share namespace "shared";
// alice may also use serve's own namespace "svc" and draw chain "order";
// dave has a quota of 3 machine IDs; carol may fetch any segment.
const (
	alice = "alice-token-0123456789"
	bob   = "bob-token-0123456789"
	carol = "carol-token-0123456789"
	dave  = "dave-token-0123456789"
)

const testTokens = "alice " + alice + " namespaces=svc,shared segments=order\n" +
	"bob " + bob + " namespaces=shared\n" +
	"carol " + carol + " segments=*\n" +
	"dave " + dave + " namespaces=squat machines=3\n"

// proxyStores are the stores the proxy tests run serve on: the default
// SQLite file, and the network stores.
var proxyStores = []struct {
	name string
	spec func(testing.TB) string
}{
	{"sqlite", func(testing.TB) string { return "" }},
	{"mariadb", func(t testing.TB) string { return testdb.MariaDB(t).DSN }},
	{"postgres", func(t testing.TB) string { return testdb.Postgres(t).DSN }},
	{"redis", func(t testing.TB) string {
		_, prefix := testdb.Redis(t)
		return "redis://" + testdb.RedisAddr() + "/0?allow_volatile=1&prefix=" + url.QueryEscape(prefix)
	}},
}

// startSecure runs serve with -proxy, the test tokens, namespace svc and
// the stable instance serve-0, on store spec.
func startSecure(t *testing.T, spec string) string {
	t.Helper()
	dir := t.TempDir()
	if spec != "" { // a new database, set up as an operator would
		if _, errOut, code := runArgs(t, "store", "-store", spec, "init"); code != 0 {
			t.Fatalf("idforge store init: exit %d: %s", code, errOut)
		}
	}
	base, _ := startServe(t, dir, "-proxy", "-tokens", writeTokens(t, dir, testTokens),
		"-namespace", "svc", "-instance", "serve-0", "-store", spec)
	return base
}

// send makes one request with token (if any), a JSON body (if any) and
// header pairs, and returns the status and body. Host and Origin may be
// among the headers.
func send(t *testing.T, method, url, token, body string, hdr ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// refused checks a JSON refusal with status and code.
func refused(t *testing.T, what string, status int, body string, wantStatus int, wantCode string) {
	t.Helper()
	var e struct{ Error, Code string }
	if status != wantStatus || json.Unmarshal([]byte(body), &e) != nil || e.Code != wantCode || e.Error == "" {
		t.Errorf("%s: %d %s; want %d with code %s", what, status, body, wantStatus, wantCode)
	}
}

func newProxy(t *testing.T, base, token string) *proxystore.Store {
	t.Helper()
	ps, err := proxystore.New(proxystore.Settings{URL: base, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

var quiet = leased.LeaseSettings{Logger: slog.New(slog.DiscardHandler)}

// A lease belongs to the process that distributed it: another process,
// of the same token or another, can neither claim its stable instance
// while it lives (no two processes issue under one machine ID), nor guard
// or revert it, nor reach the server's own lease; a token reaches only its
// namespaces and segments.
func TestServeProxyLeaseOwnership(t *testing.T) {
	for _, st := range proxyStores {
		t.Run(st.name, func(t *testing.T) { leaseOwnership(t, startSecure(t, st.spec(t))) })
	}
}

func leaseOwnership(t *testing.T, base string) {
	ctx := t.Context()
	owner, twin, other := newProxy(t, base, alice), newProxy(t, base, alice), newProxy(t, base, bob)
	pod0 := machine.Instance{Namespace: "shared", ID: "pod-0", Stable: true}
	lease, err := leased.Acquire(ctx, owner, pod0, quiet)
	if err != nil {
		t.Fatal(err)
	}
	held := lease.State()

	// A second live claimant of pod-0, of the same token or another, is
	// refused; so is a registry built on it.
	for name, p := range map[string]*proxystore.Store{"same token": twin, "other token": other} {
		if st, err := p.Distribute(ctx, pod0, 10, time.Minute); !errors.Is(err, engine.ErrInstanceInUse) || !strings.Contains(err.Error(), "live") {
			t.Errorf("second claimant of pod-0 (%s): %+v, %v; want ErrInstanceInUse saying it is held live", name, st, err)
		}
	}
	if reg, err := idforge.New(ctx, idforge.Settings{Store: twin, Namespace: "shared", Instance: pod0}); err == nil {
		reg.Close()
		t.Errorf("a registry on a live lease's instance started on machine ID %d", reg.Stats().MachineID)
	}

	// Nobody else guards or reverts it: another process knows the machine
	// ID, not the lease's secret.
	stolen := held
	stolen.Holder = ""
	for name, p := range map[string]*proxystore.Store{"same token": twin, "other token": other} {
		if err := p.Guard(ctx, pod0, stolen); !errors.Is(err, engine.ErrMachineIDLost) {
			t.Errorf("guard of another's lease (%s): %v; want ErrMachineIDLost", name, err)
		}
		if err := p.Revert(ctx, pod0, stolen); !errors.Is(err, engine.ErrMachineIDLost) {
			t.Errorf("revert of another's lease (%s): %v; want ErrMachineIDLost", name, err)
		}
	}
	guess := fmt.Sprintf(`{"namespace":"shared","instance":"pod-0","stable":true,"machine_id":%d,"last_timestamp":%d,"lease":"guessed"}`,
		held.MachineID, time.Now().UnixMilli())
	code, body := send(t, "POST", base+"/v1/proxy/machines/revert", bob, guess)
	refused(t, "revert with a guessed secret", code, body, 409, wire.CodeMachineIDLost)
	// The owner's lease stands, and a newcomer gets another machine ID.
	if err := lease.Heartbeat(ctx); err != nil {
		t.Fatalf("the owner's heartbeat after the refused reverts: %v", err)
	}
	if st, err := twin.Distribute(ctx, machine.Instance{Namespace: "shared", ID: "newcomer"}, 10, time.Minute); err != nil || st.MachineID == held.MachineID {
		t.Errorf("a newcomer got %+v, %v; want a machine ID other than the owner's %d", st, err, held.MachineID)
	}

	// The server's own instance is nobody's to take, guard or give back,
	// even for a token of its namespace.
	for _, op := range []string{"distribute", "guard", "revert"} {
		code, body := send(t, "POST", base+"/v1/proxy/machines/"+op, alice,
			fmt.Sprintf(`{"namespace":"svc","instance":"serve-0","stable":true,"machine_bits":10,"safe_guard_ms":60000,"machine_id":0,"last_timestamp":%d}`, time.Now().UnixMilli()))
		refused(t, op+" of serve's own instance", code, body, 403, wire.CodeForbidden)
	}
	var layout struct {
		MachineID int64 `json:"machine_id"`
	}
	if code, body := send(t, "GET", base+"/v1/layout", alice, ""); code != 200 || json.Unmarshal([]byte(body), &layout) != nil {
		t.Fatalf("layout: %d %s", code, body)
	}
	var ids struct{ IDs []string }
	if code, body := send(t, "GET", base+"/v1/ids?count=3", alice, ""); code != 200 || json.Unmarshal([]byte(body), &ids) != nil {
		t.Fatalf("serve's own IDs after the attempts on its lease: %d %s", code, body)
	}
	id, _ := strconv.ParseInt(ids.IDs[2], 10, 64)
	if _, m, _, err := snowflake.Default.Decode(id); err != nil || m != layout.MachineID {
		t.Errorf("serve issues ID %d on machine ID %d (%v), not its lease's %d", id, m, err, layout.MachineID)
	}

	// A token reaches its namespaces and segments only.
	if _, err := other.Distribute(ctx, machine.Instance{Namespace: "svc", ID: "x"}, 10, time.Minute); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("bob in namespace svc: %v; want ErrInvalidConfig", err)
	}
	d, _ := other.Segment("order")
	if _, err := d.NextMaxID(ctx, 10); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("bob fetching segment order: %v; want ErrInvalidConfig", err)
	}
	if d, _ := owner.Segment("order"); d != nil {
		if _, err := d.NextMaxID(ctx, 10); err != nil {
			t.Errorf("alice fetching segment order: %v", err)
		}
	}

	// Given back, pod-0 is free for the next process, on its machine ID.
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := twin.Distribute(ctx, pod0, 10, time.Minute); err != nil || st.MachineID != held.MachineID {
		t.Errorf("pod-0 after its owner stopped: %+v, %v; want machine ID %d", st, err, held.MachineID)
	}
}

// Inputs that would poison a machine ID, burn a chain, squat a namespace
// or smuggle control characters are refused, and harmless afterwards.
func TestServeProxyBoundedInputs(t *testing.T) {
	for _, st := range proxyStores {
		t.Run(st.name, func(t *testing.T) { boundedInputs(t, startSecure(t, st.spec(t))) })
	}
}

func boundedInputs(t *testing.T, base string) {
	ctx := t.Context()
	// A poisoned last timestamp: refused on guard and revert.
	code, body := send(t, "POST", base+"/v1/proxy/machines/distribute", alice,
		`{"namespace":"shared","instance":"poisoner","machine_bits":10,"safe_guard_ms":60000}`)
	var ms wire.MachineState
	if code != 200 || json.Unmarshal([]byte(body), &ms) != nil || ms.Lease == "" {
		t.Fatalf("distribute: %d %s", code, body)
	}
	call := func(op string, ts int64) (int, string) {
		return send(t, "POST", base+"/v1/proxy/machines/"+op, alice, fmt.Sprintf(
			`{"namespace":"shared","instance":"poisoner","machine_id":%d,"last_timestamp":%d,"lease":%q}`, ms.MachineID, ts, ms.Lease))
	}
	for _, ts := range []int64{9223372036854775807, time.Now().Add(time.Hour).UnixMilli(), -1} {
		for _, op := range []string{"guard", "revert"} {
			code, body := call(op, ts)
			refused(t, fmt.Sprintf("%s with last_timestamp %d", op, ts), code, body, 400, wire.CodeInvalidConfig)
		}
	}
	if code, body := call("revert", time.Now().UnixMilli()); code != 200 {
		t.Fatalf("revert at now: %d %s", code, body)
	}
	// The row's next holder starts and issues.
	reg, err := idforge.New(ctx, idforge.Settings{Store: newProxy(t, base, alice), Namespace: "shared",
		Instance: machine.Instance{ID: "next-holder"}})
	if err != nil {
		t.Fatalf("the next holder of the row: %v", err)
	}
	defer reg.Close()
	if reg.Stats().MachineID != ms.MachineID {
		t.Errorf("the next holder got machine ID %d; want the reverted %d", reg.Stats().MachineID, ms.MachineID)
	}
	if _, err := reg.NextID(ctx, "snowflake", ""); err != nil {
		t.Errorf("the next holder's first ID: %v", err)
	}

	// A step beyond MaxStep is refused; the chain stays where it was.
	code, body = send(t, "POST", base+"/v1/proxy/segments/next", alice, `{"name":"order","step":9223372036754775807}`)
	refused(t, "a step of 9.2e18", code, body, 400, wire.CodeInvalidConfig)
	var ids struct{ IDs []string }
	if code, body := send(t, "GET", base+"/v1/ids/order", alice, ""); code != 200 || json.Unmarshal([]byte(body), &ids) != nil || len(ids.IDs) != 1 {
		t.Fatalf("chain order: %d %s", code, body)
	} else if id, _ := strconv.ParseInt(ids.IDs[0], 10, 64); id > 1e6 {
		t.Errorf("chain order issues %d after the refused step", id)
	}

	// A quota of machine IDs per token; a stable instance's ID counts
	// after its revert, as the store keeps it.
	squat := newProxy(t, base, dave)
	var sts []machine.State
	for i := range 3 {
		st, err := squat.Distribute(ctx, machine.Instance{Namespace: "squat", ID: "s" + strconv.Itoa(i), Stable: true}, 10, time.Minute)
		if err != nil {
			t.Fatalf("stable instance %d within the quota: %v", i, err)
		}
		sts = append(sts, st)
	}
	if err := squat.Revert(ctx, machine.Instance{Namespace: "squat", ID: "s0", Stable: true}, sts[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := squat.Distribute(ctx, machine.Instance{Namespace: "squat", ID: "s3", Stable: true}, 10, time.Minute); !errors.Is(err, engine.ErrMachineIDOverflow) || !strings.Contains(err.Error(), "quota") {
		t.Errorf("a fourth stable instance past a quota of 3: %v; want ErrMachineIDOverflow naming the quota", err)
	}

	// Proxy segment names take chain slots of the token that opens them:
	// carol gets MaxChains names and then 429, and her full allowance keeps
	// nobody else out.
	admitted := 0
	for i := range wire.MaxChains + 10 {
		code, body := send(t, "POST", base+"/v1/proxy/segments/next", carol, fmt.Sprintf(`{"name":"seg%d","step":1}`, i))
		switch {
		case code == 200:
			admitted++
		case admitted < wire.MaxChains:
			t.Fatalf("segment %d refused below the allowance: %d %s", i, code, body)
		default:
			refused(t, "a segment past the token's allowance", code, body, 429, "too_many_chains")
		}
	}
	if admitted != wire.MaxChains {
		t.Errorf("%d segments admitted for one token; want %d", admitted, wire.MaxChains)
	}
	if code, body := send(t, "GET", base+"/v1/ids/one-more", alice, ""); code != 200 {
		t.Errorf("another token's new chain after one token used its allowance: %d %s", code, body)
	}

	// One grammar for namespaces, instances and segment names.
	for _, bad := range []string{"a\x00b", "a\r\nb", "a\u202eb", "", ".hidden", strings.Repeat("n", 129)} {
		q, _ := json.Marshal(bad)
		code, body := send(t, "POST", base+"/v1/proxy/machines/distribute", alice,
			fmt.Sprintf(`{"namespace":%s,"instance":"i","machine_bits":10,"safe_guard_ms":60000}`, q))
		refused(t, fmt.Sprintf("namespace %q", bad), code, body, 400, wire.CodeInvalidConfig)
		code, body = send(t, "POST", base+"/v1/proxy/machines/distribute", alice,
			fmt.Sprintf(`{"namespace":"shared","instance":%s,"machine_bits":10,"safe_guard_ms":60000}`, q))
		refused(t, fmt.Sprintf("instance %q", bad), code, body, 400, wire.CodeInvalidConfig)
		code, body = send(t, "POST", base+"/v1/proxy/segments/next", carol, fmt.Sprintf(`{"name":%s,"step":1}`, q))
		refused(t, fmt.Sprintf("segment %q", bad), code, body, 400, wire.CodeInvalidConfig)
	}
}

// /readyz during a store outage tells an anonymous caller "not ready" and
// nothing else; a token holder gets the reason.
func TestServeReadyzOutage(t *testing.T) {
	_, prefix := testdb.Redis(t)
	fp, err := faultproxy.Start(testdb.RedisAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	base := startSecure(t, "redis://"+fp.Addr()+"/0?allow_volatile=1&prefix="+url.QueryEscape(prefix))
	if code, body := send(t, "GET", base+"/readyz", "", ""); code != 200 || body != `{"status":"ready"}`+"\n" {
		t.Fatalf("anonymous readyz: %d %q", code, body)
	}
	if code, body := send(t, "GET", base+"/readyz", alice, ""); code != 200 || !strings.Contains(body, `"machine_id":0`) {
		t.Fatalf("readyz with a token: %d %q", code, body)
	}
	fp.Cut()
	defer fp.Restore()
	code, body := 0, ""
	// Readiness is cached for a second; a minute guards against a hang.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, body = send(t, "GET", base+"/readyz", "", ""); code == 503 {
			break
		}
	}
	if want := `{"error":"not ready","code":"not_ready"}` + "\n"; code != 503 || body != want {
		t.Fatalf("anonymous readyz in the outage: %d %q; want 503 %q", code, body, want)
	}
	// A token holder gets the reason, not the store's address.
	if code, body := send(t, "GET", base+"/readyz", alice, ""); code != 503 || !strings.Contains(body, "not ready: ") || strings.Contains(body, fp.Addr()) ||
		strings.Contains(body, prefix) {
		t.Errorf("readyz with a token in the outage: %d %q; want the reason without the store's address or prefix", code, body)
	}
	if code, body := send(t, "GET", base+"/healthz", "", ""); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("anonymous healthz: %d %q", code, body)
	}
}

// A web page on the machine of a token-less loopback server cannot use it:
// a foreign Origin, a cross-site fetch, a text/plain POST and a foreign
// Host (DNS rebinding) are refused, and the chain is not burned.
func TestServeCrossSite(t *testing.T) {
	base, _ := startServe(t, t.TempDir(), "-proxy")
	host := strings.TrimPrefix(base, "http://")
	_, port, _ := strings.Cut(host, ":")
	burn := `{"name":"order","step":1000000}`
	for _, c := range []struct {
		what   string
		method string
		body   string
		status int
		code   string
		hdr    []string
	}{
		{"a form POST from a foreign page", "POST", burn, 403, "cross_origin", []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}},
		{"a foreign Origin with JSON", "POST", burn, 403, "cross_origin", []string{"Origin", "http://evil.example"}},
		{"a null Origin", "POST", burn, 403, "cross_origin", []string{"Origin", "null"}},
		{"a text/plain POST", "POST", burn, 415, "unsupported_media_type", []string{"Content-Type", "text/plain"}},
		{"DNS rebinding", "POST", burn, 403, "forbidden_host", []string{"Host", "evil.example:" + port, "Origin", "http://evil.example:" + port}},
	} {
		code, body := send(t, c.method, base+"/v1/proxy/segments/next", "", c.body, c.hdr...)
		refused(t, c.what, code, body, c.status, c.code)
	}
	code, body := send(t, "GET", base+"/v1/ids/order?count=10000", "", "", "Sec-Fetch-Site", "cross-site")
	refused(t, "a cross-site GET (an <img>)", code, body, 403, "cross_origin")
	code, body = send(t, "GET", base+"/v1/ids/order", "", "", "Host", "evil.example:"+port)
	refused(t, "a rebound read", code, body, 403, "forbidden_host")
	var ids struct{ IDs []string }
	if code, body := send(t, "GET", base+"/v1/ids/order", "", ""); code != 200 || json.Unmarshal([]byte(body), &ids) != nil || ids.IDs[0] != "1" {
		t.Errorf("chain order after the attempts: %d %s; want ID 1", code, body)
	}

	// -allowed-hosts adds names.
	base, _ = startServe(t, t.TempDir(), "-allowed-hosts", "ids.internal", "-namespace", "other")
	_, port, _ = strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	if code, body := send(t, "GET", base+"/v1/ids", "", "", "Host", "ids.internal:"+port); code != 200 {
		t.Errorf("an allowed host: %d %s", code, body)
	}
	code, body = send(t, "GET", base+"/v1/ids", "", "", "Host", "other.internal:"+port)
	refused(t, "a host not allowed", code, body, 403, "forbidden_host")
}

// The state page names a SQLite store by its file name, not its path.
func TestServeStatePageNoPath(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	code, body := send(t, "GET", base+"/", "", "")
	if code != 200 || !strings.Contains(body, "sqlite "+defaultStoreFile) || strings.Contains(body, dir) {
		t.Errorf("state page: %d; want it to name %q and not the directory %s", code, "sqlite "+defaultStoreFile, dir)
	}
}
