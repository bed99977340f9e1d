package testdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process of the caller's own, on a free
// loopback port, so that a test (or the torture driver) may restart, empty or
// kill -9 it: never the shared Redis. It dies with the process that started
// it (on Linux).
type RedisServer struct {
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// RedisVolatile returns the redis-server arguments of a server without
// persistence: a restart comes back empty.
func RedisVolatile() []string { return []string{"--save", "", "--appendonly", "no"} }

// RedisDurable returns the redis-server arguments of a server with AOF and
// appendfsync always (the README's recommendation) and no RDB snapshots.
func RedisDurable() []string {
	return []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
}

// StartRedisServer starts redis-server with args (persistence settings) in
// the test's temp folder and waits until it answers; it is killed when the
// test ends. Without a redis-server on PATH the test is skipped, or fails
// when IDFORGE_REQUIRE_SERVERS=1.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	s, err := RunRedisServer(t.Context(), t.TempDir(), args...)
	if errors.Is(err, exec.ErrNotFound) {
		unavailable(t, "redis-server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// RunRedisServer starts redis-server with args on a free loopback port with
// dir as its working directory, and waits until it answers. It is the
// StartRedisServer of programs: the caller kills the server and removes dir.
// Without a redis-server on PATH the error wraps exec.ErrNotFound.
func RunRedisServer(ctx context.Context, dir string, args ...string) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &RedisServer{port: port, dir: dir, args: args}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir is the server's working directory, where its AOF and RDB files go.
func (s *RedisServer) Dir() string { return s.dir }

// String names the server and its arguments.
func (s *RedisServer) String() string { return fmt.Sprintf("redis-server %s %v", s.Addr(), s.args) }

// Start starts the server (again, after Kill or ShutdownNoSave) on the same
// port and directory, and waits until it answers. A server that does not
// answer within 30 s is killed.
func (s *RedisServer) Start(ctx context.Context) error {
	if s.cmd != nil {
		return errors.New("redis-server on " + s.Addr() + " is already running")
	}
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--daemonize", "no", "--logfile", ""}, s.args...)
	cmd := exec.Command("redis-server", args...)
	setRedisProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil || time.Now().After(deadline):
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer: %w", s.Addr(), err)
		}
		select {
		case <-done:
			s.cmd = nil
			return errors.New("redis-server on " + s.Addr() + " exited at start")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL, as a crash would, and waits for the process to end.
// It does nothing when the server is not running.
func (s *RedisServer) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// ShutdownNoSave stops the server cleanly without writing anything (SHUTDOWN
// NOSAVE) and waits up to 30 s for the process to end: without persistence
// it comes back empty.
func (s *RedisServer) ShutdownNoSave(ctx context.Context) error {
	if s.cmd == nil {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	_ = c.ShutdownNoSave(ctx).Err() // the connection drops: no reply
	c.Close()
	select {
	case <-s.done:
		s.cmd = nil
		return nil
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
	return errors.New("redis-server on " + s.Addr() + " did not shut down")
}

// Client returns a client of the server, closed when the test ends. It
// retries little, so a stopped server fails fast.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}
