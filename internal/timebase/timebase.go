// Package timebase is the time machinery the generators and their leases
// share: [Steady], the time base of a running generator that ignores wall
// steps back, [Cached], a clock read once per resolution for the fastest
// layouts, and [Synchronizer], which waits out a clock that went backwards.
// It imports engine and engine/clock.
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

// Monotonic is a [clock.Clock] that also reads a monotonic clock: one that
// moves only forward, as time passes, whatever is done to the wall clock.
// [Steady] runs on it. clock.System, [Cached] and the clocktest fake
// implement it.
type Monotonic interface {
	clock.Clock
	// Elapsed returns the monotonic time since an origin of the clock's own.
	Elapsed() time.Duration
}

// processStart carries the monotonic reading Cached and the system time
// base count from.
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

// refresh stores the monotonic reading before the wall time, and [Steady]
// loads them in the other order: a wall time it pairs with a later
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

// Steady returns the time base of a running generator on c: it starts at
// c's wall time and then follows c's monotonic reading (see [Monotonic]),
// re-synced forward to the wall time whenever that reads later, never
// backward. A wall clock stepped back, by any amount, is not seen: the time
// base runs on until the wall clock catches up. One stepped forward is
// followed at once, as before.
//
// Steady returns c itself when c is not [Monotonic], and when Steady made
// it: a generator and the lease that fences it share one time base by
// passing one Steady clock to both. The clock returned sleeps on c and has
// two more methods: `UnixNano() int64`, the generators' fast path, and
// `Wall() time.Time`, c's own reading, for comparisons with other hosts'
// clocks.
func Steady(c clock.Clock) clock.Clock {
	if c == nil {
		c = clock.System
	}
	if _, ok := c.(*steady); ok {
		return c
	}
	m, ok := c.(Monotonic)
	if !ok {
		return c
	}
	s := &steady{mono: m, system: c == clock.System}
	if n, ok := c.(interface{ UnixNano() int64 }); ok {
		s.wall = n.UnixNano
	} else {
		s.wall = func() int64 { return c.Now().UnixNano() }
	}
	wall, mono := s.read()
	s.offset.Store(wall - mono)
	return s
}

type steady struct {
	mono   Monotonic
	wall   func() int64
	system bool // read both from one time.Now
	// offset is the time base minus the monotonic reading, in
	// nanoseconds: the largest wall-minus-monotonic difference seen.
	offset atomic.Int64
}

// read returns the wall time and the monotonic reading, the wall first: a
// clock moving between the two reads then makes the wall look behind, which
// is ignored, never ahead.
func (s *steady) read() (wall, mono int64) {
	if s.system {
		t := time.Now()
		return t.UnixNano(), int64(t.Sub(processStart))
	}
	wall = s.wall()
	return wall, int64(s.mono.Elapsed())
}

// UnixNano returns the time base in Unix nanoseconds.
func (s *steady) UnixNano() int64 {
	wall, mono := s.read()
	for {
		off := s.offset.Load()
		if wall-mono <= off {
			return mono + off
		}
		if s.offset.CompareAndSwap(off, wall-mono) {
			return wall
		}
	}
}

func (s *steady) Now() time.Time { return time.Unix(0, s.UnixNano()) }

func (s *steady) Wall() time.Time { return s.mono.Now() }

func (s *steady) Sleep(ctx context.Context, d time.Duration) error { return s.mono.Sleep(ctx, d) }

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
