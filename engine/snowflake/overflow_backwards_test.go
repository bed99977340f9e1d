package snowflake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// steppingClock is a frozen clock whose Sleep behaves like a real timer:
// a sleep of d lets d pass (the clock advances by d), except that the first
// sleep also sees an NTP step back of stepBack, and a sleep longer than
// tooLong blocks until ctx ends, as a real timer of that length would.
type steppingClock struct {
	mu       sync.Mutex
	now      time.Time
	stepBack time.Duration
	stepped  bool
	tooLong  time.Duration
	longest  time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.longest = max(c.longest, d)
	if d > c.tooLong {
		c.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	c.now = c.now.Add(d)
	if !c.stepped {
		c.stepped = true
		c.now = c.now.Add(-c.stepBack)
	}
	c.mu.Unlock()
	return ctx.Err()
}

// A clock that steps back by far more than MaxBackwards while a caller waits
// for the next tick (its sequence is used up) must make NextID fail with
// engine.ErrClockBackwards, as it does when the step is seen anywhere else,
// not sleep until the clock reaches the next tick again (an hour here).
func TestOverflowWaitRefusesLongClockStepBack(t *testing.T) {
	l := snowflake.Layout{Epoch: snowflake.Default.Epoch, TimestampBits: 31, MachineBits: 10, SequenceBits: 1, Unit: time.Second}
	start := time.Now().Truncate(time.Second).Add(500 * time.Millisecond)
	clk := &steppingClock{now: start, stepBack: time.Hour, tooLong: time.Minute}
	g, err := snowflake.New(1, snowflake.Settings{Layout: l, Clock: clk, MaxBackwards: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 { // the tick's whole sequence (1 bit)
		if _, err := g.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The third ID waits for the next second; during that sleep the clock
	// steps back an hour.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	began := time.Now()
	_, err = g.NextID(cctx)
	took := time.Since(began)
	clk.mu.Lock()
	longest := clk.longest
	clk.mu.Unlock()
	if !errors.Is(err, engine.ErrClockBackwards) {
		t.Fatalf("NextID after a 1h step back during the overflow wait: got %v after %v (longest sleep asked: %v); "+
			"want engine.ErrClockBackwards at once (MaxBackwards is 10ms)", err, took.Round(time.Millisecond), longest)
	}
}
