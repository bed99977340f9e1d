package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/tests/testdb"
)

// startRedisServer starts the redis-server the driver runs for -store redis,
// on a free loopback port, without persistence: the store_reset fault
// restarts it empty (SHUTDOWN NOSAVE, then start it again), which the driver
// may only do to a Redis of its own, never to a shared one. Its close kills
// it and removes its directory.
func startRedisServer(ctx context.Context) (*testdb.RedisServer, func() error, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, nil, fmt.Errorf("-store redis runs a redis-server of its own: %w", err)
	}
	dir, err := os.MkdirTemp("", "idforge-torture-redis-")
	if err != nil {
		return nil, nil, err
	}
	s, err := testdb.RunRedisServer(ctx, dir, testdb.RedisVolatile()...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return s, func() error { s.Kill(); return os.RemoveAll(dir) }, nil
}

// resetRedis stops s with SHUTDOWN NOSAVE (killing it if it does not stop)
// and starts it again: it comes back empty. It returns the number of keys it
// held before and after.
func resetRedis(ctx context.Context, s *testdb.RedisServer) (before, after int64, err error) {
	if before, err = dbSize(ctx, s); err != nil {
		return 0, 0, fmt.Errorf("DBSIZE: %w", err)
	}
	if err := s.ShutdownNoSave(ctx); err != nil {
		s.Kill()
	}
	if err := s.Start(ctx); err != nil {
		return before, 0, err
	}
	after, err = dbSize(ctx, s)
	return before, after, err
}

// dbSize returns the number of keys s holds, on a connection of its own.
func dbSize(ctx context.Context, s *testdb.RedisServer) (int64, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	return c.DBSize(ctx).Result()
}
