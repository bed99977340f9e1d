// Package serve load-tests `idforge serve` over loopback, side by side with
// the in-process library drawing the same IDs. It builds the idforge binary
// from the parent module, runs it on 127.0.0.1 with a fresh SQLite store in
// a temporary directory, and measures:
//
//   - single-ID requests (GET /v1/ids) at 1, 16 and 64 connections:
//     requests per second and p99 latency;
//   - batches of 1,000 (GET /v1/ids?count=1000 and /v1/ids/{chain}?count=1000):
//     IDs per second;
//   - the in-process library: a snowflake generator, and a segment chain on
//     the same server's store through the proxy store.
//
// Every sub-benchmark is bounded by b.N (set it with -benchtime, e.g. 3s or
// 2000x) and by a 30 s deadline; traffic goes to 127.0.0.1 only.
//
//	cd bench && go test -run '^$' -bench Serve -benchtime 3s ./serve
package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/idforge/idforge/internal/chain"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
)

// deadline bounds every sub-benchmark, whatever b.N asks for.
const deadline = 30 * time.Second

var listening = regexp.MustCompile(`listening on (http://\S+) \(machine ID (\d+)`)

// startServe builds and runs `idforge serve -proxy` on loopback and returns its base URL.
func startServe(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "idforge")
	build := exec.Command("go", "build", "-o", bin, "./cmd/idforge")
	build.Dir = filepath.Join("..", "..") // the idforge module
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-proxy", "-namespace", "bench")
	cmd.Dir = dir
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, out)
			return m[1]
		}
	}
	b.Fatal("idforge serve printed no address")
	return ""
}

// conn is one keep-alive HTTP/1.1 connection with a minimal client: it
// writes a fixed GET and reads the status line, the headers and a
// Content-Length body. net/http's client costs the shared 2 cores several
// times what the server spends per request; this one measures the server.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte
}

func dial(base, path string) (*conn, error) {
	host := strings.TrimPrefix(base, "http://")
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10),
		req: []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAccept: application/json\r\n\r\n")}, nil
}

// get sends the request and reads the answer, returning its body length.
func (c *conn) get() (int, error) {
	c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(c.req); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return 0, fmt.Errorf("status %q", bytes.TrimSpace(line))
	}
	n := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(h, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return 0, fmt.Errorf("no Content-Length")
	}
	_, err = c.r.Discard(n)
	return n, err
}

// load sends b.N GETs of path over conns keep-alive connections, one
// goroutine per connection, and reports requests/s, IDs/s (perReq IDs a
// request) and the p50/p99 latency.
func load(b *testing.B, base, path string, conns, perReq int) {
	cs := make([]*conn, conns)
	for i := range cs {
		c, err := dial(base, path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.c.Close()
		if _, err := c.get(); err != nil { // warm the connection
			b.Fatal(err)
		}
		cs[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	lat := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, c := range cs {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Go(func() {
			ls := make([]time.Duration, 0, n)
			for range n {
				if ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if _, err := c.get(); err != nil {
					b.Error(err)
					break
				}
				ls = append(ls, time.Since(t0))
			}
			lat[i] = ls
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		b.Fatal("no request answered")
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(len(all)*perReq)/elapsed.Seconds(), "IDs/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "p99-ms")
}

// inProcess draws b.N IDs from g on conns goroutines and reports IDs/s.
func inProcess(b *testing.B, conns int, next func(context.Context) (int64, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range conns {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Go(func() {
			for range n {
				if _, err := next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "IDs/s")
}

func BenchmarkServe(b *testing.B) {
	base := startServe(b)
	for _, conns := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("single/snowflake/conns=%d", conns), func(b *testing.B) { load(b, base, "/v1/ids", conns, 1) })
	}
	b.Run("single/chain/conns=16", func(b *testing.B) { load(b, base, "/v1/ids/order", 16, 1) })
	for _, conns := range []int{1, 4} {
		b.Run(fmt.Sprintf("batch1000/snowflake/conns=%d", conns), func(b *testing.B) { load(b, base, "/v1/ids?count=1000", conns, 1000) })
		b.Run(fmt.Sprintf("batch1000/chain/conns=%d", conns), func(b *testing.B) { load(b, base, "/v1/ids/order?count=1000", conns, 1000) })
	}

	// The in-process library, for the same IDs.
	b.Run("in-process/snowflake", func(b *testing.B) {
		g, err := snowflake.New(1023) // a machine ID serve does not hold
		if err != nil {
			b.Fatal(err)
		}
		inProcess(b, 4, g.NextID)
	})
	b.Run("in-process/chain-via-proxystore", func(b *testing.B) {
		st, err := proxystore.New(proxystore.Settings{URL: base})
		if err != nil {
			b.Fatal(err)
		}
		d, _ := st.Segment("order")
		ch, err := chain.New(d, segment.Settings{}, chain.Owned{})
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		inProcess(b, 4, ch.NextID)
	})
}
