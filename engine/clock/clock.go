// Package clock is the time source of the snowflake generators: the system
// clock, a cached clock for the fastest layouts, a controllable [Fake] for
// tests, the [Steady] time base running generators and their leases share,
// and the [Synchronizer] that waits out a clock that went backwards.
package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and sleeps. Sleep returns ctx.Err() if ctx ends first.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// Monotonic is a [Clock] that also reads a monotonic clock: one that moves
// only forward, as time passes, whatever is done to the wall clock. [Steady]
// runs on it. System, [Cached] and [Fake] implement it.
type Monotonic interface {
	Clock
	// Elapsed returns the monotonic time since an origin of the clock's own.
	Elapsed() time.Duration
}

// System is the operating system's wall clock; its monotonic reading is
// the time since the process started.
var System Clock = systemClock{}

type systemClock struct{}

// processStart carries the monotonic reading Elapsed counts from.
var processStart = time.Now()

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Elapsed() time.Duration { return time.Since(processStart) }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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

// Fake is a clock for tests: it stands still until told to move. Sleep
// advances it by the duration slept (unless ManualSleep is set) so code that
// waits out a clock step finishes at once and deterministically.
//
// Its monotonic reading (Elapsed) moves with the wall time under Advance,
// Set and StepBack, so code on a [Steady] time base sees those moves as
// they are, backwards too, as on a clock without a monotonic reading. Only
// StepWall moves the wall time alone, as an NTP step does.
type Fake struct {
	mu   sync.Mutex
	now  time.Time
	mono time.Duration
	// ManualSleep makes Sleep block until another goroutine moves the clock
	// past the wake-up time, instead of advancing it.
	ManualSleep bool
	cond        *sync.Cond
	sleeps      atomic.Int64
}

// NewFake returns a fake clock reading t.
func NewFake(t time.Time) *Fake {
	f := &Fake{now: t}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Elapsed returns the fake monotonic reading: 0 at NewFake, moved by
// every change but StepWall.
func (f *Fake) Elapsed() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Set moves the clock to t, forwards or backwards, the monotonic reading
// with it.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.mono += t.Sub(f.now)
	f.now = t
	f.mu.Unlock()
	f.cond.Broadcast()
}

// Advance moves the clock forward by d (backward if d is negative), the
// monotonic reading with it.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mono += d
	f.mu.Unlock()
	f.cond.Broadcast()
}

// StepBack moves the clock backward by d, the monotonic reading with it:
// a step back that a [Steady] time base sees.
func (f *Fake) StepBack(d time.Duration) { f.Advance(-d) }

// StepWall moves the wall time alone by d (back if d is negative), as an
// NTP step does: the monotonic reading, and so a [Steady] time base already
// running on the clock, does not move; sleepers are not woken.
func (f *Fake) StepWall(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Sleeps reports how many times Sleep was called.
func (f *Fake) Sleeps() int64 { return f.sleeps.Load() }

// Sleep advances the clock by d, or with ManualSleep waits for it to pass.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	f.sleeps.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	if !f.ManualSleep {
		if d > 0 {
			f.Advance(d)
		}
		return nil
	}
	// Sleep is time passing: it waits on the monotonic reading.
	f.mu.Lock()
	wake := f.mono + d
	f.mu.Unlock()
	// Broadcast under the lock: between the sleeper's ctx check and its
	// Wait an unlocked Broadcast would be lost and the sleeper never woken.
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.mono < wake {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.cond.Wait()
	}
	return nil
}
