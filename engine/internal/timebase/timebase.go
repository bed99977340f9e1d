// Package timebase is the engine's time machinery beside the steady time
// base (clock.Steady): [Cached], a clock read once per resolution for the
// fastest layouts, and [Synchronizer], which waits out a clock that went
// backwards. It imports engine and engine/clock.
package timebase

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// processStart carries the monotonic reading Cached counts from.
var processStart = time.Now()

func sleep(ctx context.Context, d time.Duration) error { return clock.System.Sleep(ctx, d) }

// Cached is a clock that reads the system clock once per resolution in a
// background goroutine, so Now costs one atomic load instead of a system call
// (about 50 ns). It is never ahead of the system clock and lags it by at most
// the resolution plus scheduling delay: IDs stay unique and ordered, their
// timestamps a little late. Use it for wide-sequence layouts where the
// per-ID cost matters more than timestamp precision. Close stops the goroutine.
type Cached struct {
	now  atomic.Int64 // Unix nanoseconds
	mono atomic.Int64 // Elapsed, read with now
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// NewCached starts a cached clock refreshed every resolution (at least 100µs).
func NewCached(resolution time.Duration) *Cached {
	resolution = max(resolution, 100*time.Microsecond)
	c := &Cached{stop: make(chan struct{}), done: make(chan struct{})}
	c.refresh()
	go func() {
		defer close(c.done)
		t := time.NewTicker(resolution)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.refresh()
			}
		}
	}()
	return c
}

// refresh stores the monotonic reading before the wall time, and
// clock.Steady loads them in the other order: a wall time it pairs with a later
// monotonic reading can only look behind, never ahead of the system clock.
func (c *Cached) refresh() {
	t := time.Now()
	c.mono.Store(int64(t.Sub(processStart)))
	c.now.Store(t.UnixNano())
}

// Now returns the time read at the last refresh.
func (c *Cached) Now() time.Time { return time.Unix(0, c.now.Load()) }

// Elapsed returns the monotonic reading of the last refresh, counted from
// the start of the process.
func (c *Cached) Elapsed() time.Duration { return time.Duration(c.mono.Load()) }

// UnixNano returns the time read at the last refresh without building a
// time.Time: the hot path of generators that check for it.
func (c *Cached) UnixNano() int64 { return c.now.Load() }

// Sleep sleeps on the system clock.
func (c *Cached) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

// Close stops the refresh goroutine and waits for it to exit.
func (c *Cached) Close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return nil
}

// DefaultMaxBackwards is how far back a clock may step and still be waited
// out when no other limit is set (snowflake.Settings.MaxBackwards documents
// it to users). Longer steps are errors: a generator that stalls callers for
// seconds is worse than one that fails fast.
const DefaultMaxBackwards = 10 * time.Millisecond

// Synchronizer waits for the clock to catch up with a time the generator has
// already used. It is used at run time,
// when the clock reads earlier than the last ID's timestamp, and at start-up,
// when the last timestamp saved for this machine ID is ahead of the clock.
type Synchronizer struct {
	Clock clock.Clock
	// MaxWait is the longest step back that is waited out; zero means
	// DefaultMaxBackwards. Beyond it WaitUntil returns an error wrapping
	// engine.ErrClockBackwards that says by how much.
	MaxWait time.Duration
}

// WaitUntil returns once the clock reads target or later. If the clock is
// behind by more than MaxWait it returns at once with an error; if ctx ends
// first it returns ctx's error.
func (s Synchronizer) WaitUntil(ctx context.Context, target time.Time) error {
	c := s.Clock
	if c == nil {
		c = clock.System
	}
	limit := s.MaxWait
	if limit <= 0 {
		limit = DefaultMaxBackwards
	}
	for {
		behind := target.Sub(c.Now())
		if behind <= 0 {
			return nil
		}
		if behind > limit {
			return &BackwardsError{Behind: behind, MaxWait: limit}
		}
		if err := c.Sleep(ctx, behind); err != nil {
			return fmt.Errorf("idforge: waiting %v for the clock: %w", behind, err)
		}
	}
}

// BackwardsError reports a clock step back too long to wait out. It matches
// engine.ErrClockBackwards with errors.Is.
type BackwardsError struct {
	Behind  time.Duration // how far the clock is behind the last used time
	MaxWait time.Duration // the longest step that would have been waited out
}

// Error says how far behind the clock is and how long a step is waited out.
func (e *BackwardsError) Error() string {
	return fmt.Sprintf("%v: clock is %v behind the last issued timestamp (waits out at most %v)",
		engine.ErrClockBackwards, e.Behind, e.MaxWait)
}

// Is makes errors.Is(err, engine.ErrClockBackwards) true.
func (e *BackwardsError) Is(target error) bool { return target == engine.ErrClockBackwards }
