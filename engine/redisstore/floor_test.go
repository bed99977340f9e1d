package redisstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine/internal/segcheck"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/tests/testdb"
)

// crashAfterRaise fails the first fetch script (its mode argument, third
// from the end, is "1")
// after deleting the segment key: Redis acknowledged the raise, then crashed
// and came back from an AOF (everysec) without it, the epoch intact.
type crashAfterRaise struct {
	c    *redis.Client
	key  string
	done atomic.Bool
}

func (h *crashAfterRaise) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *crashAfterRaise) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *crashAfterRaise) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if n := len(args); n > 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && args[n-3] == "1" && !h.done.Swap(true) {
			h.c.Del(ctx, h.key)
			err := errors.New("connection reset by peer")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestFloorLostRaiseAfterCrash: Redis acknowledges the raise to Floor's
// answer, fails the fetch after it and comes back without the raise, its
// epoch intact. The next fetch must not recreate the counter at Start: the
// answer counts as handed out, so the counter below it is a store that went
// back.
func TestFloorLostRaiseAfterCrash(t *testing.T) {
	c, prefix := testdb.Redis(t)
	ctx := t.Context()
	floor := redisstore.Settings{Floor: func(context.Context, string) (int64, error) { return 41_000, nil }}
	s, err := redisstore.Open(ctx, c, with(testOptions(prefix), floor))
	if err != nil {
		t.Fatal(err)
	}
	hooked := redis.NewClient(&redis.Options{Addr: testdb.RedisAddr()})
	defer hooked.Close()
	hooked.AddHook(&crashAfterRaise{c: c, key: s.SegmentKey("order")})
	s2, err := redisstore.Open(ctx, hooked, with(testOptions(prefix), floor))
	if err != nil {
		t.Fatal(err)
	}
	seg, _ := s2.Segment("order")
	if _, err := seg.NextMaxID(ctx, 100); err == nil {
		t.Fatal("the crashed fetch succeeded")
	} else {
		t.Logf("crashed fetch: %v", err)
	}
	segcheck.ExpectAbove(t, seg, 100, 41_000, "the fetch after a raise to Floor's 41,000 lost in a crash")
}
