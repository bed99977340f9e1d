package redisstore_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/tests/testdb"
)

// commandCounter is a go-redis hook that records the name of every command
// sent, pipelined or not: one entry is one round trip for a lone command.
// The handshake of a new pooled connection (HELLO, CLIENT SETINFO) is a cost
// per connection, not per call, and is left out.
type commandCounter struct {
	mu    sync.Mutex
	names []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.record(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.record(cmds...)
		return next(ctx, cmds)
	}
}

func (c *commandCounter) record(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		if name := cmd.Name(); name != "hello" && name != "client" {
			c.names = append(c.names, name)
		}
	}
}

// take returns the commands recorded since the last call.
func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// env is one test's store on the real Redis.
type env struct {
	store   *redisstore.Store
	client  *redis.Client
	prefix  string
	counter *commandCounter
}

// newEnv returns a store on the test's Redis under a throw-away prefix, with
// a command counter hooked into its client.
func newEnv(t *testing.T, opts ...redisstore.Settings) env {
	t.Helper()
	client, prefix := testdb.Redis(t)
	counter := &commandCounter{}
	client.AddHook(counter)
	s, err := redisstore.Open(context.Background(), client, with(testOptions(prefix), opts...))
	if err != nil {
		t.Fatal(err)
	}
	return env{store: s, client: client, prefix: prefix, counter: counter}
}

// testOptions are the settings of a store on the shared test Redis: its own
// key prefix, no reset grace (no other process uses the prefix) and volatile
// allowed (the developer's Redis may run without persistence;
// persistence_test.go covers the check).
func testOptions(prefix string) redisstore.Settings {
	return redisstore.Settings{Prefix: prefix, ResetGrace: -1, AllowVolatile: true, Init: true}
}

// with returns base with every field that is set in over set on it.
func with(base redisstore.Settings, over ...redisstore.Settings) redisstore.Settings {
	b := reflect.ValueOf(&base).Elem()
	for _, o := range over {
		v := reflect.ValueOf(o)
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				b.Field(i).Set(v.Field(i))
			}
		}
	}
	return base
}

// downStore returns a store whose Redis (a server of the test's own) was
// killed after Open.
func downStore(t *testing.T, opts ...redisstore.Settings) *redisstore.Store {
	t.Helper()
	srv := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	s, err := redisstore.Open(context.Background(), srv.Client(t), with(testOptions("down:"), opts...))
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	return s
}

func TestOpenRejectsBadConfig(t *testing.T) {
	client, prefix := testdb.Redis(t)
	ctx := context.Background()
	cases := map[string]struct {
		client redis.Cmdable
		opts   []redisstore.Settings
	}{
		"nil client":     {nil, nil},
		"negative start": {client, []redisstore.Settings{{Start: -1}}},
		"empty hash tag": {client, []redisstore.Settings{{Prefix: "app{}:"}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := redisstore.Open(ctx, c.client, with(testOptions(prefix), c.opts...)); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("Open: got %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := redisstore.Open(ctx, client, redisstore.Settings{Prefix: prefix + "{app}:", Start: 5,
		Clock: clocktest.NewFake(fakeStart), ResetGrace: -1, AllowVolatile: true}); err != nil {
		t.Fatalf("valid settings rejected: %v", err)
	}
}

// Windows whose sums overflow are refused at Open naming the field (see
// sqlstore's TestOpenRefusesOverflowingWindows), before Redis is asked
// anything.
func TestOpenRefusesOverflowingWindows(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	for _, c := range []struct {
		set   redisstore.Settings
		field string
	}{
		{redisstore.Settings{RideThrough: math.MaxInt64}, "redisstore.Settings.RideThrough"},
		{redisstore.Settings{RideThrough: 24*time.Hour + time.Millisecond}, "redisstore.Settings.RideThrough"},
		{redisstore.Settings{ResetGrace: math.MaxInt64}, "redisstore.Settings.ResetGrace"},
	} {
		if _, err := redisstore.Open(t.Context(), client, c.set); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Open(%+v) = %v; want ErrInvalidConfig naming %s", c.set, err, c.field)
		}
	}
}

// Names with a control byte or broken UTF-8 are refused up front.
func TestControlBytesInNamesRefused(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"order\x00", "line\nbreak", "\xff"} {
		if _, err := e.store.Segment(name); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "segment name") {
			t.Errorf("Segment(%q) = %v; want ErrInvalidConfig naming the segment name", name, err)
		}
		for _, inst := range []machine.Instance{{Namespace: name, ID: "a"}, {Namespace: "ns", ID: name}} {
			if st, err := e.store.Distribute(t.Context(), inst, 10, time.Minute); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Errorf("Distribute(%+v) = %+v, %v; want ErrInvalidConfig", inst, st, err)
			}
		}
	}
	if _, err := e.store.Segment(""); err != nil {
		t.Errorf("Segment(\"\") = %v; the empty name stays valid on Redis", err)
	}
}
