package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/tests/testdb"
)

var listening = regexp.MustCompile(`listening on (http://\S+) \(machine ID (\d+)`)

// startServe runs `idforge serve` in process with args in a fresh working
// directory (so the default SQLite store is the test's own) and returns its
// base URL and a stop function that cancels it like SIGTERM and returns its
// exit status.
func startServe(t *testing.T, dir string, args ...string) (string, func() int) {
	t.Helper()
	if dir != "" {
		t.Chdir(dir)
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		c := run(ctx, append([]string{"serve", "-addr", "127.0.0.1:0"}, args...), pw, &errOut)
		pw.Close()
		code <- c
	}()
	sc := bufio.NewScanner(pr)
	var base string
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		t.Fatalf("serve did not start: exit %d: %s", <-code, errOut.String())
	}
	var once sync.Once
	stop := func() int {
		c := -1
		once.Do(func() { cancel(); c = <-code })
		return c
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if v != nil && json.Unmarshal(b, v) != nil {
		t.Fatalf("GET %s: %d %q: not JSON", url, res.StatusCode, b)
	}
	return res.StatusCode
}

// serve alone runs on idforge.db in the working directory.
func TestServeDefaultStore(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	var ids struct{ IDs []string }
	if code := getJSON(t, base+"/v1/ids?count=5", &ids); code != 200 || len(ids.IDs) != 5 {
		t.Fatalf("snowflake: %d %v", code, ids)
	}
	if code := getJSON(t, base+"/v1/ids/order?count=5", &ids); code != 200 || ids.IDs[0] != "1" {
		t.Fatalf("chain: %d %v", code, ids)
	}
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`idforge_ids_issued_total{kind="chain",name="order"} 5`,
		`idforge_ids_issued_total{kind="snowflake",name=""} 5`,
		`idforge_lease_machine_id 0`,
		`idforge_chain_fetches_total{name="order"}`, // the store calls, as Stats counts them
		`idforge_chain_head_gap{name="order"}`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var ready struct{ Status string }
	if code := getJSON(t, base+"/readyz", &ready); code != 200 || ready.Status != "ready" {
		t.Fatalf("readyz: %d %v", code, ready)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, defaultStoreFile)); err != nil {
		t.Fatal(err)
	}
	// A second run on the same file, in another namespace, continues the
	// chain after the first's ranges: chains are per store (README).
	base, _ = startServe(t, dir, "-namespace", "other")
	if code := getJSON(t, base+"/v1/ids/order", &ids); code != 200 || ids.IDs[0] == "1" {
		t.Fatalf("chain after restart: %d %v", code, ids)
	}
}

func TestServeFlagsAndEnv(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	setupServe(fs)
	fs.Parse([]string{"-namespace", "cli"})
	env := map[string]string{"IDFORGE_NAMESPACE": "env", "IDFORGE_LAYOUT": "jssafe", "IDFORGE_CHAINS": "a,b", "IDFORGE_PROXY": "true"}
	fromEnv, err := applyEnv(fs, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"layout": "IDFORGE_LAYOUT", "chains": "IDFORGE_CHAINS", "proxy": "IDFORGE_PROXY"}; !maps.Equal(fromEnv, want) {
		t.Errorf("applyEnv set %v, want %v", fromEnv, want)
	}
	for name, want := range map[string]string{"namespace": "cli", "layout": "jssafe", "chains": "a,b", "proxy": "true", "addr": "127.0.0.1:8080"} {
		if got := fs.Lookup(name).Value.String(); got != want {
			t.Errorf("-%s = %q, want %q", name, got, want)
		}
	}
	for k, want := range map[string]string{
		"IDFORGE_LAYOUT":           `IDFORGE_LAYOUT="nosuch": want one of default, second, jssafe, jssafe-second`,
		"IDFORGE_SHUTDOWN_TIMEOUT": `IDFORGE_SHUTDOWN_TIMEOUT="nosuch": want a positive duration such as 10s`,
		"IDFORGE_PROXY":            `IDFORGE_PROXY="nosuch": want true or false`,
		"IDFORGE_RIDE_THROUGH":     `IDFORGE_RIDE_THROUGH="nosuch": want a positive duration such as 60s`,
	} {
		fs = flag.NewFlagSet("serve", flag.ContinueOnError)
		setupServe(fs)
		bad := func(v string) string {
			if v == k {
				return "nosuch"
			}
			return ""
		}
		if _, err := applyEnv(fs, bad); err == nil || err.Error() != want {
			t.Errorf("%s=nosuch: %v, want %s", k, err, want)
		}
	}

	for _, tt := range []struct {
		args     []string
		storeEnv string
		want     string
	}{
		{[]string{"serve", "-addr", "127.0.0.1:0", "-store", "ftp://nowhere"}, "", `idforge serve: -store "ftp://nowhere": want a redis:// URL`},
		{[]string{"serve", "-addr", "127.0.0.1:0"}, "ftp://nowhere", `idforge serve: IDFORGE_STORE "ftp://nowhere": want a redis:// URL`},
		{[]string{"serve", "-tokens", "/nonexistent/tokens"}, "", "tokens file"},
		{[]string{"serve", "-addr", "127.0.0.1:0", "-chains", "bad name"}, "", `chain name "bad name"`},
		{[]string{"serve", "extra"}, "", "unexpected arguments"},
		{[]string{"serve", "-proxy", "-addr", "0.0.0.0:0"}, "", "give -tokens"},
	} {
		t.Chdir(t.TempDir())
		t.Setenv("IDFORGE_STORE", tt.storeEnv)
		if _, errOut, code := runArgs(t, tt.args...); code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q IDFORGE_STORE=%q: exit %d, %q; want exit 2 and %q", tt.args, tt.storeEnv, code, errOut, tt.want)
		}
	}
}

// A Redis without persistence is a configuration error, exit 2 like the
// others, and the message names the URL option that accepts it.
func TestServeVolatileRedis(t *testing.T) {
	vol := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	t.Chdir(t.TempDir())
	url := "redis://" + vol.Addr() + "/0"
	_, errOut, code := runArgs(t, "serve", "-addr", "127.0.0.1:0", "-store", url)
	if code != 2 || !strings.Contains(errOut, "add ?allow_volatile=1 to the -store URL") || strings.Contains(errOut, "Settings") {
		t.Errorf("volatile Redis: exit %d, %q; want exit 2 and the URL option", code, errOut)
	}
	_, errOut, code = runArgs(t, "serve", "-addr", "127.0.0.1:0", "-store", url+"?prefix={}")
	if code != 2 || !strings.Contains(errOut, "empty hash tag") || strings.Contains(errOut, "allow_volatile") {
		t.Errorf("bad prefix: exit %d, %q; want exit 2 and no word of allow_volatile", code, errOut)
	}
	_, stop := startServe(t, "", "-store", url+"?allow_volatile=1")
	if code := stop(); code != 0 {
		t.Errorf("with ?allow_volatile=1: exit %d", code)
	}
}

// A port in use or a bad address fails before the store is opened (no
// idforge.db appears, no machine ID is taken), naming -addr or the variable
// that set it.
func TestServeListenFirst(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve", "-addr", busy.Addr().String()}, "", "idforge serve: -addr: listen tcp " + busy.Addr().String()},
		{[]string{"serve", "-addr", "nonsense"}, "", "idforge serve: -addr: listen tcp: address nonsense"},
		{[]string{"serve"}, busy.Addr().String(), "idforge serve: IDFORGE_ADDR: listen tcp " + busy.Addr().String()},
	} {
		dir := t.TempDir()
		t.Chdir(dir)
		t.Setenv("IDFORGE_ADDR", tt.env)
		_, errOut, code := runArgs(t, tt.args...)
		if code != 2 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%q IDFORGE_ADDR=%q: exit %d, %q; want exit 2 and %q", tt.args, tt.env, code, errOut, tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, defaultStoreFile)); err == nil {
			t.Errorf("%q IDFORGE_ADDR=%q: the store was opened before listening", tt.args, tt.env)
		}
	}
}

// The binary: SIGTERM finishes in-flight requests, exits 0 and reverts the
// machine ID, which the next instance then takes.
func TestServeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildIdforge(t)
	dir := t.TempDir()
	start := func() *serveProc { return startProc(t, bin, dir, []string{"IDFORGE_NAMESPACE=sigterm"}) }
	a := start()
	baseA, idA, stderrA := a.base, a.machineID, a.stderr
	idB := start().machineID
	if idA == idB {
		t.Fatalf("two servers on machine ID %d", idA)
	}

	// Keep batches in flight while SIGTERM arrives: every answer that comes
	// back is whole.
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	var answered, broken int64
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				res, err := http.Get(baseA + "/v1/ids?count=10000")
				if err != nil {
					return // the listener closed
				}
				var v struct{ IDs []string }
				err = json.NewDecoder(res.Body).Decode(&v)
				res.Body.Close()
				mu.Lock()
				if res.StatusCode != 200 || err != nil || len(v.IDs) != 10000 {
					broken++
				} else {
					answered++
				}
				mu.Unlock()
			}
		}()
	}
	// SIGTERM once answers flow, so some are in flight when it lands.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := answered
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer from the server within a minute")
		}
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	err := a.cmd.Wait()
	close(stopLoad)
	wg.Wait()
	if err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderrA)
	}
	if want := fmt.Sprintf(`msg="idforge serve: machine ID given back" machine_id=%d`, idA); !strings.Contains(stderrA.String(), want) {
		t.Errorf("the log after SIGTERM lacks %s:\n%s", want, stderrA)
	}
	if answered == 0 || broken > 0 {
		t.Fatalf("%d whole answers, %d broken", answered, broken)
	}
	// The reverted ID is free for the next instance.
	idC := start().machineID
	if idC != idA {
		t.Fatalf("after SIGTERM the next server got machine ID %d, want the reverted %d", idC, idA)
	}
}

// With -proxy, a proxy store takes machine IDs and segments from serve's store.
func TestServeProxy(t *testing.T) {
	base, _ := startServe(t, t.TempDir(), "-proxy", "-namespace", "svc")
	ps, err := proxystore.New(proxystore.Settings{URL: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := ps.Distribute(ctx, machine.Instance{Namespace: "svc", ID: "remote"}, 10, time.Minute)
	if err != nil || st.MachineID != 1 { // serve itself holds 0
		t.Fatalf("Distribute through serve: %+v, %v", st, err)
	}
	d, _ := ps.Segment("order")
	if max, err := d.NextMaxID(ctx, 100); err != nil || max != 100 {
		t.Fatalf("NextMaxID through serve: %d, %v", max, err)
	}
	// serve's own chain continues after the proxy's range.
	var ids struct{ IDs []string }
	if code := getJSON(t, base+"/v1/ids/order", &ids); code != 200 || ids.IDs[0] != "101" {
		t.Fatalf("chain after the proxy's range: %d %v", code, ids)
	}
}
