package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/internal/chain/chaintest"
	"github.com/idforge/idforge/tests/testdb"
)

func TestSegmentStartAppliesOnlyToFreshNames(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if _, err := segmentOf(t, e.store, "order").NextMaxID(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A process configured with another start joins the existing sequence
	// instead of restarting it, so the two cannot hand out the same range.
	other, err := redisstore.Open(ctx, e.client, with(testOptions(e.prefix), redisstore.Settings{Start: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	late := segmentOf(t, other, "order")
	if got, err := late.NextMaxID(ctx, 10); err != nil || got != 20 {
		t.Fatalf("existing name with start 1000: got %d, %v; want 20", got, err)
	}
}

func TestSegmentFetchIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		start int64
		cmd   string
	}{{0, "eval"}, {7, "eval"}} {
		e := newEnv(t, redisstore.Settings{Start: tc.start})
		d := segmentOf(t, e.store, "trips")
		e.counter.take()
		for i := range 5 {
			if _, err := d.NextMaxID(ctx, 100); err != nil {
				t.Fatal(err)
			}
			if got := e.counter.take(); !slices.Equal(got, []string{tc.cmd}) {
				t.Fatalf("start %d, fetch %d sent %v, want exactly [%s]", tc.start, i, got, tc.cmd)
			}
		}
	}
}

func TestSegmentOverflowIsIDOverflow(t *testing.T) {
	ctx := context.Background()
	for _, start := range []int64{0, 7} {
		e := newEnv(t, redisstore.Settings{Start: start})
		d := segmentOf(t, e.store, "full")
		// An operator's raise: a counter written behind the store's back
		// is not trusted.
		if _, err := redisstore.AdminOf(e.store).RaiseCounter(ctx, "full", math.MaxInt64-5); err != nil {
			t.Fatal(err)
		}
		_, err := d.NextMaxID(ctx, 10)
		if !errors.Is(err, engine.ErrIDOverflow) || !strings.Contains(err.Error(), `segment "full"`) {
			t.Fatalf("start %d: got %v, want ErrIDOverflow naming the segment", start, err)
		}
		// Nothing was consumed: a step that still fits succeeds.
		if got, err := d.NextMaxID(ctx, 5); err != nil || got != math.MaxInt64 {
			t.Fatalf("start %d: last fitting step: got %d, %v", start, got, err)
		}
	}
}

func TestSegmentStoreDownIsStoreUnavailable(t *testing.T) {
	for _, start := range []int64{0, 7} {
		d := segmentOf(t, downStore(t, redisstore.Settings{Start: start}), "order")
		_, err := d.NextMaxID(context.Background(), 10)
		if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), `segment "order"`) {
			t.Fatalf("start %d: got %v, want ErrStoreUnavailable naming the segment", start, err)
		}
	}
}

func TestSegmentHonoursContext(t *testing.T) {
	s := newEnv(t).store
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := segmentOf(t, s, "order").NextMaxID(ctx, 10)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("cancelled ctx: got %v, want context.Canceled wrapped in ErrStoreUnavailable", err)
	}
}

// The suite checks the first range at the start, contiguous non-overlapping
// ranges under 16 racing goroutines, independent names, large and invalid
// steps, cancellation and two chains sharing a name.
func TestSegmentConformance(t *testing.T) {
	for _, start := range []int64{0, 1_000_000} {
		t.Run(fmt.Sprintf("start=%d", start), func(t *testing.T) {
			s := newEnv(t, redisstore.Settings{Start: start}).store
			segments := func(t *testing.T, name string) segment.Distributor { return segmentOf(t, s, name) }
			segmenttest.Run(t, segmenttest.Suite{Segments: segments, Start: start})
			chaintest.Run(t, segments, start)
		})
	}
}

// segmentOf returns s.Segment(name), failing the test on an error.
func segmentOf(t testing.TB, s *redisstore.Store, name string) segment.Distributor {
	t.Helper()
	d, err := s.Segment(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFloorAndRestoreConformance runs the Settings.Floor and restore parts
// of the suite on the shared Redis under a prefix of its own: a wipe
// deletes the prefix's keys, as a restart without persistence would; a
// snapshot DUMPs them and puts them back with RESTORE (what an old RDB or
// AOF file brings back); the Admin is the operator's commands on a store
// value opened for them, as `idforge store` opens one.
func TestFloorAndRestoreConformance(t *testing.T) {
	client, prefix := testdb.Redis(t)
	store := func(t *testing.T) *redisstore.Store {
		s, err := redisstore.Open(t.Context(), client, testOptions(prefix))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	segmenttest.Run(t, segmenttest.Suite{
		Open:     openWithFloor(client, testOptions(prefix)),
		Wipe:     wipeKeys(client, prefix, store(t).EpochKey(), true),
		Snapshot: func(t *testing.T) func(t *testing.T) { return snapshotKeys(t, client, prefix) },
		Admin:    func(t *testing.T) machine.Admin { return redisstore.AdminOf(store(t)) },
		Machines: func(t *testing.T) machine.Distributor { return store(t) },
	})
}

// openWithFloor opens, for each call, a Store on client with set and the
// given Floor, as a new process would.
func openWithFloor(client redis.Cmdable, set redisstore.Settings) func(*testing.T, func(context.Context, string) (int64, error)) func(string) segment.Distributor {
	return func(t *testing.T, floor func(context.Context, string) (int64, error)) func(string) segment.Distributor {
		s, err := redisstore.Open(t.Context(), client, with(set, redisstore.Settings{Floor: floor}))
		if err != nil {
			t.Fatal(err)
		}
		return func(name string) segment.Distributor { return segmentOf(t, s, name) }
	}
}

// wipeKeys deletes the keys under prefix, or with epochOnly the epoch key
// alone. With mustDelete a wipe that finds no key fails the test: the
// suite wipes a store it wrote to.
func wipeKeys(client *redis.Client, prefix, epochKey string, mustDelete bool) func(t *testing.T, epochOnly bool) {
	return func(t *testing.T, epochOnly bool) {
		if epochOnly {
			if err := client.Del(t.Context(), epochKey).Err(); err != nil {
				t.Fatal(err)
			}
			return
		}
		n, err := testdb.DeleteRedisKeys(t.Context(), client, prefix)
		if err != nil || mustDelete && n == 0 {
			t.Fatalf("wipe: %d keys deleted, %v", n, err)
		}
	}
}

// snapshotKeys DUMPs every key under prefix and returns a function that
// deletes the keys under prefix and RESTOREs the dumped ones.
func snapshotKeys(t *testing.T, c *redis.Client, prefix string) func(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	dumps := map[string]string{}
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		d, err := c.Dump(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		dumps[iter.Val()] = d
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T) {
		t.Helper()
		if _, err := testdb.DeleteRedisKeys(t.Context(), c, prefix); err != nil {
			t.Fatal(err)
		}
		for k, d := range dumps {
			if err := c.Restore(t.Context(), k, 0, d).Err(); err != nil {
				t.Fatalf("RESTORE %s: %v", k, err)
			}
		}
	}
}

// TestFloorRace runs the suite's wipe race on the shared Redis under a
// prefix of its own.
func TestFloorRace(t *testing.T) {
	client, prefix := testdb.Redis(t)
	keys, err := redisstore.Open(t.Context(), client, testOptions(prefix)) // for the key names
	if err != nil {
		t.Fatal(err)
	}
	segmenttest.Run(t, segmenttest.Suite{
		RaceOpen: openWithFloor(client, with(testOptions(prefix), redisstore.Settings{ResetGrace: 300 * time.Millisecond})),
		Wipe:     wipeKeys(client, prefix, keys.EpochKey(), false),
	})
}
