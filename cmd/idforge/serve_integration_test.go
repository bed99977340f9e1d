package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// buildIdforge builds the binary once per test.
func buildIdforge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idforge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveProc is one `idforge serve` process.
type serveProc struct {
	cmd       *exec.Cmd
	base      string
	machineID int
	stderr    *lockedBuffer
	served    atomic.Int64 // IDs the test's clients drew from it
}

// lockedBuffer is a bytes.Buffer a process writes to while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProc runs bin serve on a free loopback port in dir (a fresh
// directory if ""), with env added to the environment, and waits for its
// address. The process is killed at the end of the test if still running.
func startProc(t *testing.T, bin, dir string, env []string, args ...string) *serveProc {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.Command(bin, append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	p := &serveProc{cmd: cmd, stderr: new(lockedBuffer)}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, out)
			p.base = m[1]
			p.machineID, _ = strconv.Atoi(m[2])
			return p
		}
	}
	cmd.Wait()
	t.Fatalf("serve %q printed no address: %s", args, p.stderr)
	return nil
}

// TestServeKill9NoDuplicates runs two serve processes on one real store and
// four clients drawing snowflake and chain IDs from both; one server is
// killed with SIGKILL mid-load and restarted. No ID is ever handed out twice.
func TestServeKill9NoDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	bin := buildIdforge(t)
	stores := map[string]func(testing.TB) string{
		"postgres": func(t testing.TB) string { return testdb.Postgres(t).DSN },
		"mariadb":  func(t testing.TB) string { return testdb.MariaDB(t).DSN },
		"redis": func(t testing.TB) string {
			// Its keys are deleted when the test ends. The test does not
			// restart Redis, so one without persistence is fine here.
			_, prefix := testdb.Redis(t)
			return "redis://" + testdb.RedisAddr() + "/0?allow_volatile=1&prefix=" + url.QueryEscape(prefix)
		},
	}
	for name, dsn := range stores {
		t.Run(name, func(t *testing.T) { kill9(t, bin, dsn(t)) })
	}
}

func kill9(t *testing.T, bin, store string) {
	ns := testdb.UniqueName("k9")
	chain := testdb.UniqueName("order")
	args := []string{"-store", store, "-namespace", ns}
	// A new store is declared brand-new, as an operator sets one up; init
	// again changes nothing, and says so (-exists-ok: with status 0).
	if out, err := exec.Command(bin, "store", "init", "-store", store).CombinedOutput(); err != nil || !strings.Contains(string(out), "brand-new") {
		t.Fatalf("idforge store init: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "store", "init", "-exists-ok", "-store", store).CombinedOutput(); err != nil || !strings.Contains(string(out), "already initialised") {
		t.Fatalf("idforge store init -exists-ok, again: %v: %s", err, out)
	}
	a, b := startProc(t, bin, "", nil, args...), startProc(t, bin, "", nil, args...)
	var procA atomic.Pointer[serveProc] // a, then its replacement
	procA.Store(a)

	type result struct {
		snow, chain []string
		failed      int
	}
	results := make([]result, 4)
	var drawn [2]atomic.Int64 // snowflake, chain IDs drawn
	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop) })
	var wg sync.WaitGroup
	t.Cleanup(func() { stopLoad(); wg.Wait() }) // when a wait below fails
	httpc := &http.Client{Timeout: 5 * time.Second}
	for c := range 4 {
		wg.Go(func() {
			r := &results[c]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := b
				if (c+i)%2 == 0 {
					p = procA.Load()
				}
				path, dst, kind := "/v1/ids?count=100", &r.snow, 0
				if i%2 == 1 {
					path, dst, kind = "/v1/ids/"+chain+"?count=100", &r.chain, 1
				}
				res, err := httpc.Get(p.base + path)
				if err != nil {
					r.failed++ // the killed server
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var v struct{ IDs []string }
				err = json.NewDecoder(res.Body).Decode(&v)
				res.Body.Close()
				if res.StatusCode != 200 || err != nil {
					r.failed++
					continue
				}
				*dst = append(*dst, v.IDs...)
				p.served.Add(int64(len(v.IDs)))
				drawn[kind].Add(int64(len(v.IDs)))
			}
		})
	}
	// Wait for the load on both servers, however slow the machine: the
	// checks below need IDs from each, and of each kind.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("still waiting after a minute until %s", what)
			}
		}
	}
	until("both servers serve IDs", func() bool { return a.served.Load() >= 1000 && b.served.Load() >= 1000 })
	if err := a.cmd.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	a.cmd.Wait()
	time.Sleep(300 * time.Millisecond)
	a2 := startProc(t, bin, "", nil, args...)
	procA.Store(a2)
	until("the restarted server serves IDs", func() bool {
		return a2.served.Load() >= 1000 && drawn[0].Load() >= 1000 && drawn[1].Load() >= 1000
	})
	stopLoad()
	wg.Wait()

	for _, p := range []*serveProc{a2, b} {
		p.cmd.Process.Signal(os.Interrupt)
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("serve after SIGINT: %v", err)
		}
	}

	for kind, pick := range map[string]func(result) []string{
		"snowflake": func(r result) []string { return r.snow },
		"chain":     func(r result) []string { return r.chain },
	} {
		seen := map[string]int{}
		total, dups := 0, 0
		for c, r := range results {
			for _, id := range pick(r) {
				if prev, ok := seen[id]; ok {
					if dups < 5 {
						t.Errorf("%s ID %s handed to client %d and client %d", kind, id, prev, c)
					}
					dups++
				}
				seen[id] = c
				total++
			}
		}
		t.Logf("%s: %d IDs from 4 clients, %d duplicates", kind, total, dups)
		if total < 1000 {
			t.Errorf("%s: only %d IDs drawn", kind, total)
		}
	}
	failed := 0
	for _, r := range results {
		failed += r.failed
	}
	t.Logf("requests refused or failed around the kill: %d", failed)
	// Each server answered at the address it printed; the restarted one
	// too, so the IDs checked above include some it issued after the kill.
	for name, p := range map[string]*serveProc{"a": a, "b": b, "a restarted": a2} {
		if p.served.Load() == 0 {
			t.Errorf("server %s (%s) served no IDs", name, p.base)
		}
	}
}
