package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the redis-server process the driver starts for -store
// redis, on a free loopback port, without persistence: the store_reset fault
// restarts it empty (SHUTDOWN NOSAVE, then start it again), which the driver
// may only do to a Redis of its own, never to a shared one.
type redisServer struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedisServer starts redis-server without persistence.
func startRedisServer(ctx context.Context) (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("-store redis runs a redis-server of its own: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "idforge-torture-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{port: port, dir: dir}
	if err := s.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start runs the server on its port and waits until it answers.
func (s *redisServer) start(ctx context.Context) error {
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--daemonize", "no", "--logfile", "", "--save", "", "--appendonly", "no")
	setProcAttr(s.cmd) // dies with the driver
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	s.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(s.cmd)
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case time.Now().After(deadline):
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer: %w", s.addr(), err)
		}
		select {
		case <-done:
			return errors.New("redis-server on " + s.addr() + " exited at start")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *redisServer) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
}

// reset stops the server with SHUTDOWN NOSAVE and starts it again: it comes
// back empty. It returns the number of keys it held before and after.
func (s *redisServer) reset(ctx context.Context) (before, after int64, err error) {
	c := s.client()
	before, err = c.DBSize(ctx).Result()
	if err == nil {
		_ = c.ShutdownNoSave(ctx).Err() // the connection drops: no reply
	}
	c.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("DBSIZE: %w", err)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.kill()
	}
	if err := s.start(ctx); err != nil {
		return before, 0, err
	}
	c = s.client()
	defer c.Close()
	after, err = c.DBSize(ctx).Result()
	return before, after, err
}

// kill ends the server (SIGKILL) and waits for it.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// close kills the server and removes its directory.
func (s *redisServer) close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}
