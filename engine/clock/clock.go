// Package clock is the time source of the snowflake generators: the system
// clock, a cached clock for the fastest layouts, a controllable [Fake] for
// tests, and the [Synchronizer] that waits out a clock that went backwards.
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

// System is the operating system's wall clock.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

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
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// NewCached starts a cached clock refreshed every resolution (at least 100µs).
func NewCached(resolution time.Duration) *Cached {
	resolution = max(resolution, 100*time.Microsecond)
	c := &Cached{stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(time.Now().UnixNano())
	go func() {
		defer close(c.done)
		t := time.NewTicker(resolution)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.now.Store(time.Now().UnixNano())
			}
		}
	}()
	return c
}

// Now returns the time read at the last refresh.
func (c *Cached) Now() time.Time { return time.Unix(0, c.now.Load()) }

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
type Fake struct {
	mu  sync.Mutex
	now time.Time
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

// Set moves the clock to t, forwards or backwards.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
	f.cond.Broadcast()
}

// Advance moves the clock forward by d (backward if d is negative).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	f.cond.Broadcast()
}

// StepBack moves the clock backward by d, as an NTP step would.
func (f *Fake) StepBack(d time.Duration) { f.Advance(-d) }

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
	f.mu.Lock()
	wake := f.now.Add(d)
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
	for f.now.Before(wake) {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.cond.Wait()
	}
	return nil
}
