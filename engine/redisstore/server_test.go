package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/internal/testdb"
)

// server is a redis-server process of the test's own, on a free loopback
// port, so a test may restart, empty or kill -9 it (never the shared Redis).
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// Volatile and durable are the two persistence set-ups the tests start.
var (
	volatile = []string{"--save", "", "--appendonly", "no"}
	durable  = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
)

// startServer starts redis-server with args (persistence settings); it is
// killed when the test ends. Without a redis-server on PATH the test is
// skipped, or fails when IDFORGE_REQUIRE_SERVERS=1.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testdb.Required() {
			t.Fatalf("redis-server is required (IDFORGE_REQUIRE_SERVERS=1): %v", err)
		}
		t.Skipf("no redis-server to start: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{t: t, port: port, dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--daemonize", "no", "--logfile", ""}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL, as a crash would, and waits for the process to end.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// shutdownNoSave stops the server cleanly without writing a snapshot.
func (s *server) shutdownNoSave() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	_ = c.ShutdownNoSave(context.Background()).Err() // the connection drops: no reply
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("redis-server on %s did not shut down", s.Addr())
	}
	s.cmd = nil
}

// restart starts the server again on the same port and directory.
func (s *server) restart() { s.t.Helper(); s.start() }

// client returns a client of the server, closed when the test ends. It
// retries little, so a stopped server fails fast.
func (s *server) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

func (s *server) String() string { return fmt.Sprintf("redis-server %s %v", s.Addr(), s.args) }
