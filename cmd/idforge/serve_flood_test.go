package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
// 200, a bounded number of times, and returns the last status.
func answered(t *testing.T, url, token string) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status := 0
	for range 40 {
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
