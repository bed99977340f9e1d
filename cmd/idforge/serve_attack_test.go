package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/wire"
	"github.com/idforge/idforge/tests/faultproxy"
	"github.com/idforge/idforge/tests/testdb"
)

// Tokens of the attack tests, besides those of testTokens: a token that may
// only read (no options), one of every segment, one scoped to chain order.
const (
	reader  = "reader-token-0123456789"
	scoped  = "scoped-token-0123456789"
	invoice = "INV-{yyyy}{MM}{dd}-{seq:6}"
)

const attackTokens = testTokens + "reader " + reader + "\n" + "scoped " + scoped + " chains=order\n"

// sqliteAndRedis are the stores the attack tests whose outcome the store
// judges run on.
var sqliteAndRedis = proxyStores[0:1:1]

func init() { sqliteAndRedis = append(sqliteAndRedis, proxyStores[3]) }

// startAttacked runs serve in-process with -proxy, the attack tokens,
// namespace svc, stable instance serve-0, the dated chain invoice and more
// args, on store spec ("" for SQLite in a new directory).
func startAttacked(t *testing.T, spec string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if spec != "" {
		if _, errOut, code := runArgs(t, "store", "-store", spec, "init"); code != 0 {
			t.Fatalf("idforge store init: exit %d: %s", code, errOut)
		}
	}
	base, _ := startServe(t, dir, append([]string{"-proxy", "-tokens", writeTokens(t, dir, attackTokens),
		"-namespace", "svc", "-instance", "serve-0", "-store", spec, "-dated", "invoice=" + invoice}, args...)...)
	return base
}

// periodKeys are the names a dated chain's periods have about now: the
// day, month and year of now and of a minute on, in UTC.
func periodKeys(name string) []string {
	var keys []string
	for _, at := range []time.Time{time.Now().UTC(), time.Now().UTC().Add(time.Minute)} {
		keys = append(keys, name+":"+at.Format("20060102"), name+":"+at.Format("200601"), name+":"+at.Format("2006"))
	}
	return keys
}

// A dated chain's period sequences cannot be drawn, burned or proxied
// under their derived names by any token, whatever its scope: a step of
// 10^8 on invoice:<today> and 101 reads of 10,000 are refused, and the
// chain goes on issuing low numbers. A token's chains= scope holds on the
// ID routes.
func TestServeDatedChainSurvivesBurns(t *testing.T) {
	for _, st := range sqliteAndRedis {
		t.Run(st.name, func(t *testing.T) { datedSurvives(t, startAttacked(t, st.spec(t))) })
	}
}

func datedSurvives(t *testing.T, base string) {
	if code, body := send(t, "GET", base+"/v1/ids/invoice", reader, ""); code != 200 {
		t.Fatalf("the dated chain before the attacks: %d %s", code, body)
	}
	for _, name := range periodKeys("invoice") {
		code, body := send(t, "POST", base+"/v1/proxy/segments/next", carol, fmt.Sprintf(`{"name":%q,"step":100000000}`, name))
		refused(t, "a proxy fetch of "+name, code, body, 403, wire.CodeForbidden)
		code, body = send(t, "GET", base+"/v1/ids/"+name+"?count=10000", reader, "")
		refused(t, "a plain draw of "+name, code, body, 403, wire.CodeForbidden)
		code, body = send(t, "GET", base+"/v1/ids/"+name+"?format="+url.QueryEscape("X-{yyyy}-{seq:18}"), reader, "")
		refused(t, "a dated draw named "+name, code, body, 403, wire.CodeForbidden)
	}
	today := periodKeys("invoice")[0]
	for i := range 101 {
		code, body := send(t, "GET", base+"/v1/ids/"+today+"?count=10000", reader, "")
		if code != 403 {
			t.Fatalf("read %d of %s: %d %s; want 403", i, today, code, body)
		}
	}
	// A step beyond 10^8 on any name, and a chain outside the token's scope.
	code, body := send(t, "POST", base+"/v1/proxy/segments/next", carol, `{"name":"plain","step":100000001}`)
	refused(t, "a step past 10^8", code, body, 400, wire.CodeInvalidConfig)
	code, body = send(t, "GET", base+"/v1/ids/invoice", scoped, "")
	refused(t, "a chain outside the token's chains=", code, body, 403, wire.CodeForbidden)
	if code, body := send(t, "GET", base+"/v1/ids/order", scoped, ""); code != 200 {
		t.Errorf("a chain inside the token's chains=: %d %s", code, body)
	}

	var ids struct{ IDs []string }
	code, body = send(t, "GET", base+"/v1/ids/invoice?count=3", reader, "")
	if code != 200 || json.Unmarshal([]byte(body), &ids) != nil || len(ids.IDs) != 3 {
		t.Fatalf("the dated chain after the attacks: %d %s", code, body)
	}
	last := ids.IDs[2]
	if n, err := strconv.Atoi(last[len(last)-6:]); err != nil || n > 1000 {
		t.Errorf("the dated chain issues %s after the attacks; want a counter below 1000", last)
	}
}

// Chain slots are per token: a token that fills its allowance with junk
// names gets 429, and only it; a proxy client's chain, the -dated chain
// and the -chains ones keep being served.
func TestServeChainSlotsPerToken(t *testing.T) {
	base := startAttacked(t, "")
	for i := range wire.MaxChains {
		if code, body := send(t, "GET", base+"/v1/ids/junk-"+strconv.Itoa(i), reader, ""); code != 200 {
			t.Fatalf("junk chain %d within the allowance: %d %s", i, code, body)
		}
	}
	code, body := send(t, "GET", base+"/v1/ids/junk-more", reader, "")
	refused(t, "a name past the token's allowance", code, body, 429, wire.CodeTooManyChains)
	if code, body := send(t, "GET", base+"/v1/ids/junk-7", reader, ""); code != 200 {
		t.Errorf("a name the token opened, past its allowance: %d %s", code, body)
	}
	if code, body := send(t, "POST", base+"/v1/proxy/segments/next", carol, `{"name":"orders-seq","step":10}`); code != 200 {
		t.Errorf("a proxy client's segment after another token filled its allowance: %d %s", code, body)
	}
	if code, body := send(t, "GET", base+"/v1/ids/invoice", reader, ""); code != 200 {
		t.Errorf("the -dated chain, to the token at its allowance: %d %s", code, body)
	}
	if code, body := send(t, "GET", base+"/v1/ids/new-chain", alice, ""); code != 200 {
		t.Errorf("another token's new chain: %d %s", code, body)
	}

	// With -chains, the listed and the -dated chains are served, others 404.
	base = startAttacked(t, "", "-chains", "order", "-namespace", "svc2")
	for _, name := range []string{"order", "invoice"} {
		if code, body := send(t, "GET", base+"/v1/ids/"+name, reader, ""); code != 200 {
			t.Errorf("configured chain %s: %d %s", name, code, body)
		}
	}
	code, body = send(t, "GET", base+"/v1/ids/junk", reader, "")
	refused(t, "a chain off -chains", code, body, 404, wire.CodeUnknownChain)
}

// A second claimant of a live stable instance changes nothing its holder
// depends on: four loops claiming pod-victim with the holder's token and no
// secret are refused every time, so is a second registry with the
// instance, and the holder, drawing all along, loses no draw while the
// store confirms its lease again and again.
func TestServeSecondClaimantLeavesHolder(t *testing.T) {
	for _, st := range sqliteAndRedis {
		t.Run(st.name, func(t *testing.T) { secondClaimant(t, startAttacked(t, st.spec(t))) })
	}
}

func secondClaimant(t *testing.T, base string) {
	ctx := t.Context()
	victim := machine.Instance{Namespace: "shared", ID: "pod-victim", Stable: true}
	reg, err := idforge.New(ctx, idforge.Settings{Store: newProxy(t, base, alice), Namespace: "shared", Instance: victim, Logger: quiet.Logger})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	held := reg.Stats().MachineID

	var (
		stop              atomic.Bool
		drawn, failed     atomic.Int64
		claims, wrongCode atomic.Int64
		firstFailure      atomic.Value
		wg                sync.WaitGroup
	)
	wg.Go(func() {
		for !stop.Load() {
			if _, err := reg.NextID(ctx, "snowflake", ""); err != nil {
				if failed.Add(1) == 1 {
					firstFailure.Store(err.Error())
				}
				time.Sleep(time.Millisecond)
				continue
			}
			drawn.Add(1)
		}
	})
	claim := fmt.Sprintf(`{"namespace":"shared","instance":"pod-victim","stable":true,"machine_bits":10,"safe_guard_ms":%d}`, time.Minute.Milliseconds())
	const maxClaims = 4 * 5000
	for range 4 {
		wg.Go(func() {
			for !stop.Load() && claims.Add(1) <= maxClaims {
				code, body := send(t, "POST", base+"/v1/proxy/machines/distribute", alice, claim)
				if code != 409 || !strings.Contains(body, wire.CodeInstanceInUse) {
					wrongCode.Add(1)
					t.Errorf("a second claim of pod-victim: %d %s; want 409 instance_in_use", code, body)
				}
			}
		})
	}
	// The attack lasts until the store has confirmed the holder's lease
	// eight times (a heartbeat every 250 ms), or the claims run out.
	confirmed, last := 0, reg.Stats().Confirmed
	for confirmed < 8 && claims.Load() < maxClaims {
		time.Sleep(20 * time.Millisecond)
		if c := reg.Stats().Confirmed; c.After(last) {
			confirmed, last = confirmed+1, c
		}
	}
	// The accidental second pod-victim: refused, and harmless too.
	if twin, err := idforge.New(ctx, idforge.Settings{Store: newProxy(t, base, alice), Namespace: "shared", Instance: victim, Logger: quiet.Logger}); err == nil {
		twin.Close()
		t.Errorf("a second registry on the live pod-victim started on machine ID %d", twin.Stats().MachineID)
	} else if !errors.Is(err, engine.ErrInstanceInUse) {
		t.Errorf("a second registry on the live pod-victim: %v; want ErrInstanceInUse", err)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d claims, %d draws of the holder, %d failed, %d confirmations during the attack", claims.Load(), drawn.Load(), failed.Load(), confirmed)
	if n := failed.Load(); n != 0 {
		t.Fatalf("the holder failed %d draws during the attack (first: %v); want 0", n, firstFailure.Load())
	}
	if confirmed < 4 {
		t.Fatalf("the holder's lease was confirmed %d times during %d claims: the attack overlapped too few heartbeats to tell", confirmed, claims.Load())
	}
	if _, err := reg.NextID(ctx, "snowflake", ""); err != nil || reg.Stats().MachineID != held {
		t.Errorf("the holder after the attack: %v, machine ID %d; want its lease, machine ID %d", err, reg.Stats().MachineID, held)
	}
}

// Two serve replicas on one Redis store: a claim through one replica with
// safe_guard_ms=1 does not take the machine ID of the other, stopped
// (SIGSTOP) for longer than its reservation, nor that of a proxy lease
// silent as long: the reclaim cut-off is the server's (5 minutes), not the
// claimant's. A lease asking for a longer safe-guard than the server's is
// refused; the stopped replica, continued, issues on its machine ID.
func TestServeReclaimWaitsForServerCutoff(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	bin := buildIdforge(t)
	_, prefix := testdb.Redis(t)
	spec := "redis://" + testdb.RedisAddr() + "/0?allow_volatile=1&prefix=" + url.QueryEscape(prefix)
	dir := t.TempDir()
	tokens := writeTokens(t, dir, "claimant "+alice+" namespaces=svc\n")
	args := []string{"-store", spec, "-namespace", "svc", "-proxy", "-tokens", tokens}
	a, b := startProc(t, bin, dir, nil, args...), startProc(t, bin, dir, nil, args...)
	if a.machineID == b.machineID {
		t.Fatalf("two replicas on machine ID %d", a.machineID)
	}
	// A proxy lease through b that goes silent.
	code, body := send(t, "POST", b.base+"/v1/proxy/machines/distribute", alice,
		`{"namespace":"svc","instance":"silent","machine_bits":10,"safe_guard_ms":60000}`)
	var silent wire.MachineState
	if code != 200 || json.Unmarshal([]byte(body), &silent) != nil {
		t.Fatalf("the silent lease: %d %s", code, body)
	}

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// Past a's reservation (its store's ride-through window, 1 s) and the
	// reset grace (2 s): a's ID and the silent lease's are 1 ms-reclaimable
	// to a claimant that chooses its cut-off.
	time.Sleep(3500 * time.Millisecond)
	for i := range 5 {
		code, body := send(t, "POST", b.base+"/v1/proxy/machines/distribute", alice,
			fmt.Sprintf(`{"namespace":"svc","instance":"thief-%d","machine_bits":10,"safe_guard_ms":1}`, i))
		var got wire.MachineState
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("claim %d: %d %s", i, code, body)
		}
		if got.MachineID == int64(a.machineID) || got.MachineID == silent.MachineID {
			t.Errorf("claim %d with safe_guard_ms=1 took machine ID %d of a holder silent for seconds (replica a: %d, silent lease: %d)",
				i, got.MachineID, a.machineID, silent.MachineID)
		}
	}
	code, body = send(t, "POST", b.base+"/v1/proxy/machines/distribute", alice,
		`{"namespace":"svc","instance":"long","machine_bits":10,"safe_guard_ms":600000}`)
	refused(t, "a lease with a safe-guard past the server's", code, body, 400, wire.CodeInvalidConfig)

	a.cmd.Process.Signal(syscall.SIGCONT)
	continued = true
	var ids struct{ IDs []string }
	// Its lease heartbeats again within a quarter second; a minute guards
	// against a hang on a loaded host.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		code, body = send(t, "GET", a.base+"/v1/ids?count=3", "", "", "Authorization", "Bearer "+alice)
		if code == 200 || time.Now().After(deadline) {
			break
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &ids) != nil {
		t.Fatalf("replica a after SIGCONT: %d %s", code, body)
	}
	id, _ := strconv.ParseInt(ids.IDs[2], 10, 64)
	if _, m, _, err := snowflake.Default.Decode(id); err != nil || m != int64(a.machineID) {
		t.Errorf("replica a issues on machine ID %d (%v); want its own %d", m, err, a.machineID)
	}
}

// refusedLine is the summary of one token's refusals of one code.
var refusedLine = regexp.MustCompile(`msg="idforge serve: requests refused" token=(\S*) code=(\S+) count=(\d+)`)

// sumRefused adds up the counts of the refusal summaries in log, by code.
func sumRefused(log string) (map[string]int, int) {
	by, all := map[string]int{}, 0
	for _, m := range refusedLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[3])
		by[m[2]] += n
		all += n
	}
	return by, all
}

// 100,000 refused requests (bad tokens, others' leases, forbidden and
// reserved names) write a bounded number of log lines: one summary per
// token and code per interval, adding up to every refusal, and the metrics
// count them. A token's successful lease actions leave an audit line
// each, up to its budget, and the rest are counted in one line.
func TestServeRefusalFloodLogBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and floods it")
	}
	bin := buildIdforge(t)
	dir := t.TempDir()
	p := startProc(t, bin, dir, nil, "-proxy", "-tokens", writeTokens(t, dir, attackTokens), "-namespace", "svc",
		"-dated", "invoice="+invoice)
	const total = 100_000
	requests := []struct {
		method, path, token, body string
	}{
		{"GET", "/v1/ids", "wrong-token-0123456789", ""},
		{"POST", "/v1/proxy/machines/guard", bob, `{"namespace":"shared","instance":"x","machine_id":3,"last_timestamp":1}`},
		{"POST", "/v1/proxy/segments/next", bob, `{"name":"order","step":1}`},
		{"GET", "/v1/ids/" + periodKeys("invoice")[0], reader, ""},
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total; i = next.Add(1) - 1 {
				rq := requests[i%int64(len(requests))]
				var body io.Reader
				if rq.body != "" {
					body = strings.NewReader(rq.body)
				}
				req, _ := http.NewRequest(rq.method, p.base+rq.path, body)
				req.Header.Set("Authorization", "Bearer "+rq.token)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode < 400 {
					t.Errorf("request %d (%s %s): %d; want a refusal", i, rq.method, rq.path, res.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()

	// Lease actions that succeed: 300 distribute and revert pairs.
	ps := newProxy(t, p.base, bob)
	for i := range 300 {
		inst := machine.Instance{Namespace: "shared", ID: "w" + strconv.Itoa(i)}
		st, err := ps.Distribute(t.Context(), inst, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.Revert(t.Context(), inst, st); err != nil {
			t.Fatal(err)
		}
	}

	// The metrics count every refusal.
	code, metrics := send(t, "GET", p.base+"/metrics", reader, "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	counted := 0
	for line := range strings.Lines(metrics) {
		if strings.HasPrefix(line, "idforge_requests_refused_total{") {
			f := strings.Fields(line)
			n, _ := strconv.ParseFloat(f[len(f)-1], 64)
			counted += int(n)
		}
	}
	if counted != total {
		t.Errorf("idforge_requests_refused_total adds up to %d; want %d", counted, total)
	}
	// The last interval's summaries come at its end, 10 s after it began.
	droppedLine := regexp.MustCompile(`msg="idforge serve: audit lines dropped over the token's budget" token=bob count=(\d+)`)
	audited := func(log string) (lines, dropped int) {
		for _, m := range droppedLine.FindAllStringSubmatch(log, -1) {
			n, _ := strconv.Atoi(m[1])
			dropped += n
		}
		return strings.Count(log, `msg="idforge serve: proxy lease"`), dropped
	}
	log := p.stderr.String()
	for range 400 {
		_, all := sumRefused(log)
		leaseLines, dropped := audited(log)
		if all >= total && leaseLines+dropped >= 600 {
			break
		}
		time.Sleep(100 * time.Millisecond)
		log = p.stderr.String()
	}
	by, all := sumRefused(log)
	lines := strings.Count(log, "\n")
	t.Logf("%d log lines; refusals summed up: %v", lines, by)
	if all != total || by["unauthorized"] != total/4 || by[wire.CodeMachineIDLost] != total/4 || by[wire.CodeForbidden] != total/2 {
		t.Errorf("the summaries add up to %d refusals (%v); want %d, a quarter unauthorized and machine_id_lost, half forbidden", all, by, total)
	}
	leaseLines, dropped := audited(log)
	if leaseLines+dropped != 600 || leaseLines == 0 || dropped == 0 {
		t.Errorf("%d lease audit lines and %d dropped over the budget; want 600 in all, some of each", leaseLines, dropped)
	}
	if lines > 400 {
		t.Errorf("%d log lines for %d refusals and 600 lease actions; want at most 400", lines, total)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}

// Quotas survive restarts: a token with machines=3 that holds three stable
// machine IDs is refused a fourth after serve restarts, twice, and gets
// its own instances back.
func TestServeQuotaSurvivesRestarts(t *testing.T) {
	dir := t.TempDir()
	tokens := writeTokens(t, dir, testTokens)
	for run := range 3 {
		base, stop := startServe(t, dir, "-proxy", "-tokens", tokens, "-namespace", "svc")
		squat := newProxy(t, base, dave)
		if run == 0 {
			for i := range 3 {
				inst := machine.Instance{Namespace: "squat", ID: "s" + strconv.Itoa(i), Stable: true}
				st, err := squat.Distribute(t.Context(), inst, 10, time.Minute)
				if err != nil {
					t.Fatalf("stable instance %d within the quota: %v", i, err)
				}
				if err := squat.Revert(t.Context(), inst, st); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := squat.Distribute(t.Context(), machine.Instance{Namespace: "squat", ID: "s" + strconv.Itoa(3+run), Stable: true}, 10, time.Minute); !errors.Is(err, engine.ErrMachineIDOverflow) || !strings.Contains(err.Error(), "quota") {
			t.Errorf("run %d: a fourth stable instance past a quota of 3: %v; want ErrMachineIDOverflow naming the quota", run, err)
		}
		own := machine.Instance{Namespace: "squat", ID: "s1", Stable: true}
		st, err := squat.Distribute(t.Context(), own, 10, time.Minute)
		if err != nil {
			t.Fatalf("run %d: a stable instance of the token's own: %v", run, err)
		}
		if err := squat.Revert(t.Context(), own, st); err != nil {
			t.Fatal(err)
		}
		if code := stop(); code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	}
}

// Neither the answers nor the state page show a token holder the store's
// address or key prefix, during an outage of the store either.
func TestServeNoStoreAddress(t *testing.T) {
	_, prefix := testdb.Redis(t)
	fp, err := faultproxy.Start(testdb.RedisAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	base := startSecure(t, "redis://"+fp.Addr()+"/0?allow_volatile=1&prefix="+url.QueryEscape(prefix))
	_, port, _ := strings.Cut(fp.Addr(), ":")
	leaks := func(what, body string) {
		t.Helper()
		for _, secret := range []string{fp.Addr(), ":" + port, prefix, strings.TrimSuffix(prefix, ":")} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q: %s", what, secret, body)
			}
		}
	}
	fp.Cut()
	defer fp.Restore()
	seen503 := false
	for i, deadline := 0, time.Now().Add(time.Minute); time.Now().Before(deadline); i++ {
		code, body := send(t, "GET", base+"/v1/ids/fresh-"+strconv.Itoa(i), alice, "")
		leaks("a chain draw in the outage", body)
		code2, body2 := send(t, "POST", base+"/v1/proxy/segments/next", alice, `{"name":"order","step":5}`)
		leaks("a proxy fetch in the outage", body2)
		_, body3 := send(t, "GET", base+"/readyz", alice, "")
		leaks("readyz in the outage", body3)
		if code == 503 && code2 == 503 {
			seen503 = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !seen503 {
		t.Fatal("the outage never showed on the routes")
	}
	_, page := send(t, "GET", base+"/", alice, "")
	leaks("the state page", page)
}

// The tokens file must be a regular file of the server's user (or root):
// a file of another user is refused at start, a FIFO in its place is
// refused on SIGHUP without blocking, and SIGTERM still stops serve.
func TestServeTokensFileKind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	bin := buildIdforge(t)
	dir := t.TempDir()
	path := writeTokens(t, dir, "alice "+alice+"\n")
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-tokens", path).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "owned by user 65534") {
		t.Errorf("serve with a tokens file of another user: exit %d, %s; want exit 2 naming the owner", code, out)
	}
	os.Chown(path, 0, 0)
	// A symbolic link to a regular file (a Kubernetes secret volume's) is fine.
	link := filepath.Join(dir, "tokens-link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, dir, nil, "-tokens", link)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, p, "not a regular file")
	if code, body := send(t, "GET", p.base+"/v1/ids", alice, ""); code != 200 {
		t.Errorf("after a refused reload: %d %s", code, body)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(60 * time.Second): // a hang, not a slow machine
		t.Fatalf("serve did not stop on SIGTERM with a FIFO as its tokens file:\n%s", p.stderr)
	}
}

// proxystore presents its lease's secret when it asks for its instance
// again: the holder gets the instance back at once, under a new secret,
// while another process is refused.
func TestServeProxyAsksAgainWithSecret(t *testing.T) {
	base := startAttacked(t, "")
	owner, other := newProxy(t, base, alice), newProxy(t, base, alice)
	inst := machine.Instance{Namespace: "shared", ID: "again"}
	first, err := owner.Distribute(context.Background(), inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Distribute(t.Context(), inst, 10, time.Minute); !errors.Is(err, engine.ErrInstanceInUse) {
		t.Errorf("another process asking for the live instance: %v; want ErrInstanceInUse", err)
	}
	again, err := owner.Distribute(t.Context(), inst, 10, time.Minute)
	if err != nil || again.MachineID != first.MachineID || again.Holder == first.Holder {
		t.Fatalf("the holder asking again: %+v, %v; want machine ID %d under a new secret", again, err, first.MachineID)
	}
	if err := owner.Guard(t.Context(), inst, first); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Errorf("a guard with the replaced secret: %v; want ErrMachineIDLost", err)
	}
	if err := owner.Guard(t.Context(), inst, again); err != nil {
		t.Errorf("a guard with the new secret: %v", err)
	}
}
