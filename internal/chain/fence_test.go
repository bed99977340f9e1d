package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

// confirming is a fake store whose other operations (a lease's heartbeats)
// confirm it at times the test sets, as engine/sqlstore's and
// engine/redisstore's distributors report.
type confirming struct {
	*segtest.Fake
	at atomic.Int64 // Unix ns
}

func (c *confirming) Confirmed() time.Time { return time.Unix(0, c.at.Load()) }

// TestChainFence: with a Fence, a chain cut off from its store stops
// serving the IDs it holds once the store has not confirmed them for the
// Fence, serves them again when the store confirms (a heartbeat of the
// same store counts), and an idle chain confirms with a fetch of its own.
func TestChainFence(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	d := &confirming{Fake: segtest.NewFake(0)}
	c := newChain(t, d, segment.Settings{Step: 100, Fence: time.Second}, chain.Owned{Clock: clk})
	first, err := c.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.SetDown(true)
	clk.Advance(900 * time.Millisecond)
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("within the Fence: %v", err)
	}
	clk.Advance(200 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond) // bounds the wait for a store that stays down
	_, err = c.NextID(short)
	cancel()
	if !errors.Is(err, engine.ErrStoreUnavailable) || c.Stats().Ahead == 0 {
		t.Fatalf("past the Fence, store down: %v with %d IDs held; want ErrStoreUnavailable while holding IDs", err, c.Stats().Ahead)
	}
	d.at.Store(clk.Now().UnixNano()) // a heartbeat got through
	id, err := c.NextID(ctx)
	if err != nil || id <= first {
		t.Fatalf("after the store confirmed: %d, %v; want an ID above %d", id, err, first)
	}
	// Idle and up: the chain confirms by itself before the Fence runs out.
	d.SetDown(false)
	clk.Advance(700 * time.Millisecond)
	calls := d.Calls()
	eventually(t, "an idle chain's confirming fetch", func() bool { return d.Calls() > calls })
	clk.Advance(500 * time.Millisecond)
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("an idle chain whose store is up: %v", err)
	}
}

// A fenced chain whose store answers, refusing the sequence, returns the
// refusal at once rather than waiting MaxWait for a confirmation that the
// refusal will not bring.
func TestChainFenceRefusal(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	var refuse atomic.Bool
	var max atomic.Int64
	d := distFunc(func(ctx context.Context, step int64) (int64, error) {
		if refuse.Load() {
			return 0, fmt.Errorf("%w: sequence %q has no floor", engine.ErrNoFloor, "order")
		}
		return max.Add(step), nil
	})
	c := newChain(t, d, segment.Settings{Step: 100, Fence: time.Second}, chain.Owned{Name: "order", Clock: clk})
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	clk.Advance(2 * time.Second)
	_, err := c.NextID(ctx) // no deadline but MaxWait, 10 s
	if !errors.Is(err, engine.ErrNoFloor) || !errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the Fence, the store refusing: %v; want the fence's error and the refusal at once", err)
	}
}

// TestGeneratorFence: a generator past its Fence drops what it holds and
// serves from a new segment when the store answers; while it does not, it
// refuses naming the Fence.
func TestGeneratorFence(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	d := segtest.NewFake(0)
	g, err := chain.NewSingle(d, segment.Settings{Step: 100, Fence: time.Second}, chain.Owned{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.SetDown(true)
	clk.Advance(2 * time.Second)
	if _, err := g.NextID(ctx); !errors.Is(err, engine.ErrStoreUnavailable) || !errors.Is(err, engine.ErrSegmentExhausted) {
		t.Fatalf("past the Fence, store down: %v; want ErrStoreUnavailable", err)
	}
	d.SetDown(false)
	id, err := g.NextID(ctx)
	if err != nil || id <= first+99 {
		t.Fatalf("past the Fence, store up: %d, %v; want an ID of a new segment, above %d", id, err, first+99)
	}
}

// A negative Fence means "fence at the store's ride-through window": the
// registry's check lets it through (idforge.New replaces it with the
// lease's reservation), while a chain is never built with one. A Fence
// past its bound is refused by both.
func TestFenceSetting(t *testing.T) {
	if err := chain.Validate(segment.Settings{Fence: -time.Second}); err != nil {
		t.Fatalf("a negative Fence, checked for the registry: %v; want it accepted", err)
	}
	if _, err := chain.NewPlain(segtest.NewFake(0), segment.Settings{Fence: -time.Second}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Fence") {
		t.Fatalf("a chain built with a negative Fence: %v; want ErrInvalidConfig naming Fence", err)
	}
	if err := chain.Validate(segment.Settings{Fence: 25 * time.Hour}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Fence") {
		t.Fatalf("a Fence of 25 h: %v; want ErrInvalidConfig naming Fence", err)
	}
}

// sizes records the sizes a chain asks its store for.
type sizes struct {
	*confirming
	least atomic.Int64
}

func (s *sizes) NextMaxID(ctx context.Context, step int64) (int64, error) {
	for {
		old := s.least.Load()
		if step >= old || s.least.CompareAndSwap(old, step) {
			break
		}
	}
	return s.confirming.NextMaxID(ctx, step)
}

// An idle chain holding all it wants (twice its target) whose fence went
// stale during a store stall confirms with a fetch of a step: it once
// asked the store for 0 IDs, which the store refuses as invalid
// configuration, and the caller the fence held back failed with that
// refusal instead of being served when the store came back.
func TestChainFenceAfterStall(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	d := &sizes{confirming: &confirming{Fake: segtest.NewFake(0)}}
	d.least.Store(math.MaxInt64)
	c := newChain(t, d, segment.Settings{Step: 100, Fence: time.Second}, chain.Owned{Clock: clk})
	// Idle and full: the worker's first fetch tops it up to twice the
	// target (2 segments of 100), and nobody draws.
	eventually(t, "the first fetch", func() bool { return c.Stats().Ahead == 400 })
	d.at.Store(clk.Now().UnixNano()) // a heartbeat confirms, then the store stalls
	d.SetDown(true)
	calls := d.Calls()
	clk.Advance(2500 * time.Millisecond)
	// The fence is stale: the worker asks the store (down) to confirm.
	eventually(t, "a confirming fetch during the stall", func() bool { return d.Calls() > calls })
	got := make(chan error, 1)
	go func() {
		_, err := c.NextID(ctx) // fenced: waits for the store, up to MaxWait
		got <- err
	}()
	d.SetDown(false)
	if err := <-got; err != nil {
		t.Fatalf("a caller held back by the fence, store back: %v; want an ID", err)
	}
	if least := d.least.Load(); least <= 0 {
		t.Fatalf("the chain asked the store for %d IDs; want a positive size", least)
	}
}
