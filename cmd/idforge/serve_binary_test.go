package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/proxystore"
)

// writeTokens writes a tokens file of mode 600 in dir.
func writeTokens(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// memKB reads the resident set size of process pid and its peak, in KiB.
func memKB(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			peak = n
		}
	}
	return rss, peak
}

// answered asks url (with token, if any) on a new connection until it gets
// 200, for up to a minute, and returns the last status.
func answered(t *testing.T, url, token string) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if status = res.StatusCode; status == 200 {
				return status
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return status
}

// dialAll opens n connections to addr, each sending req and then nothing:
// never reading the answer (with a small receive buffer, so that the
// server's writes block), or never finishing the headers.
func dialAll(t *testing.T, addr string, n int, req string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		conns = append(conns, c)
		c.Write([]byte(req)) // a connection the server closed already fails here: fine
	}
	return conns
}

// floodRSSBoundKB is the peak resident size the flood test allows serve,
// two and a half times the 76 MiB it peaked at when measured (docs/serve.md).
const floodRSSBoundKB = 192 << 10

// TestServeFloodOneToken floods serve the way one token holder and
// anonymous slow clients would: 1,100 connections asking count=10000 and
// never reading, then 6,000 connections that never finish their headers.
// Probes and another token's requests are answered throughout, and serve's
// peak memory stays under floodRSSBoundKB.
func TestServeFloodOneToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and floods it")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("reads memory from /proc")
	}
	bin := buildIdforge(t)
	dir := t.TempDir()
	const flood, other = "flood-token-0123456789", "other-token-0123456789"
	tokens := writeTokens(t, dir, "flood "+flood+"\nother "+other+"\n")
	p := startProc(t, bin, dir, nil, "-tokens", tokens)
	addr := strings.TrimPrefix(p.base, "http://")
	pid := p.cmd.Process.Pid
	rss0, _ := memKB(t, pid)

	check := func(stage string) {
		t.Helper()
		for _, path := range []string{"/healthz", "/readyz"} {
			if code := answered(t, p.base+path, ""); code != 200 {
				t.Errorf("%s: %s answered %d", stage, path, code)
			}
		}
		if code := answered(t, p.base+"/v1/ids?count=10", other); code != 200 {
			t.Errorf("%s: the other token's request answered %d", stage, code)
		}
		rss, peak := memKB(t, pid)
		t.Logf("%s: serve RSS %d MiB, peak %d MiB", stage, rss>>10, peak>>10)
	}

	greedy := dialAll(t, addr, 1100, "GET /v1/ids?count=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+flood+"\r\n\r\n")
	check("1,100 connections of one token not reading")
	// The connections past the token's limit were answered 429 and closed.
	last := greedy[len(greedy)-1]
	last.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(last).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 429") {
		t.Errorf("the 1,100th connection of one token: %q, %v; want a 429", line, err)
	}

	dialAll(t, addr, 6000, "GET /v1/ids HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	check("6,000 more connections that never finish their headers")

	_, peak := memKB(t, pid)
	t.Logf("serve RSS at start %d MiB, peak %d MiB (bound %d MiB)", rss0>>10, peak>>10, floodRSSBoundKB>>10)
	if peak > floodRSSBoundKB {
		t.Errorf("serve's peak RSS %d MiB is over the bound %d MiB", peak>>10, floodRSSBoundKB>>10)
	}
}

// waitLog waits, a bounded number of times, for p's log to hold want.
func waitLog(t *testing.T, p *serveProc, want string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(p.stderr.String(), want) {
			return
		}
	}
	t.Fatalf("serve's log lacks %q:\n%s", want, p.stderr)
}

// SIGHUP reloads the tokens file at once for new requests; a file that
// cannot be read or is open to others leaves the tokens in force and says
// why; the process goes on and still shuts down cleanly. A tokens file
// open to others is refused at start. Each proxy lease action is logged
// with the token's name.
func TestServeSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildIdforge(t)
	dir := t.TempDir()
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	path := writeTokens(t, dir, "alice "+alice+" namespaces=svc\n")
	replace := func(content string, mode os.FileMode) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tmp, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	p := startProc(t, bin, dir, nil, "-tokens", path, "-proxy", "-namespace", "svc")
	status := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.base+"/v1/ids", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if status(alice) != 200 || status(bob) != 401 {
		t.Fatalf("before the reload: alice %d, bob %d", status(alice), status(bob))
	}

	replace("bob "+bob+" namespaces=svc\n", 0o600)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, p, `msg="idforge serve: tokens reloaded"`)
	if status(alice) != 401 || status(bob) != 200 {
		t.Fatalf("after the reload: alice %d, bob %d; want 401 and 200", status(alice), status(bob))
	}

	for i, bad := range []struct {
		content string
		mode    os.FileMode
		why     string
	}{
		{"", 0, "no such file"}, // gone: renamed away mid-deploy, say
		{"not a tokens file\n", 0o600, "tokens line 1"},
		{"alice " + alice + "\n", 0o644, "chmod 600"},
	} {
		if bad.mode == 0 {
			os.Remove(path)
		} else {
			replace(bad.content, bad.mode)
		}
		p.cmd.Process.Signal(syscall.SIGHUP)
		waitLog(t, p, bad.why)
		if n := strings.Count(p.stderr.String(), "tokens not reloaded"); n != i+1 {
			t.Fatalf("%d refused reloads logged; want %d", n, i+1)
		}
		if status(alice) != 401 || status(bob) != 200 {
			t.Fatalf("after a refused reload (%s): alice %d, bob %d; want the previous tokens", bad.why, status(alice), status(bob))
		}
	}

	// One audit line per proxy lease action.
	ps, err := proxystore.New(proxystore.Settings{URL: p.base, Token: bob})
	if err != nil {
		t.Fatal(err)
	}
	inst := machine.Instance{Namespace: "svc", ID: "worker-1"}
	st, err := ps.Distribute(t.Context(), inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Revert(t.Context(), inst, st); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"distribute", "revert"} {
		waitLog(t, p, fmt.Sprintf(`msg="idforge serve: proxy lease" action=%s token=bob namespace=svc instance=worker-1 stable=false machine_id=%d result=ok`, action, st.MachineID))
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, p.stderr)
	}
	if want := `msg="idforge serve: machine ID given back" machine_id=0`; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, p.stderr)
	}

	// At start, a file open to others is refused.
	out, err := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-tokens", path).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "chmod 600") {
		t.Errorf("serve with a tokens file of mode 644: exit %d, %s; want exit 2 naming chmod 600", code, out)
	}
}

// exitCode is the exit status err reports, 0 for nil.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
