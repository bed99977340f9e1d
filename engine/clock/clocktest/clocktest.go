// Package clocktest is a controllable clock for tests of code that takes a
// clock.Clock. It imports only the standard library.
package clocktest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Fake is a clock for tests: it stands still until told to move. Sleep
// advances it by the duration slept (unless ManualSleep is set) so code that
// waits out a clock step finishes at once and deterministically.
//
// Its monotonic reading (Elapsed) moves with the wall time under Advance,
// forwards and backwards (a negative duration), so code on a steady time
// base sees those moves as they are, as on a clock without a monotonic
// reading. Only StepWall moves the wall time alone, as an NTP step does.
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

// Advance moves the clock forward by d (backward if d is negative), the
// monotonic reading with it: a step back that a steady time base sees. To
// move it to a time t, Advance(t.Sub(f.Now())).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mono += d
	f.mu.Unlock()
	f.cond.Broadcast()
}

// StepWall moves the wall time alone by d (back if d is negative), as an
// NTP step does: the monotonic reading, and so a steady time base already
// running on the clock, does not move; sleepers are not woken.
func (f *Fake) StepWall(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Sleeps reports how many times Sleep was called. A Sleep counted here
// has fixed its wake-up time: with ManualSleep, moving the clock past it
// after seeing the count wakes it.
func (f *Fake) Sleeps() int64 { return f.sleeps.Load() }

// Sleep advances the clock by d, or with ManualSleep waits for it to pass.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	// Sleep is time passing: it waits on the monotonic reading. The call is
	// counted once its wake-up time is fixed, under the lock moves take:
	// a test that sees Sleeps go up and then moves the clock wakes it.
	f.mu.Lock()
	f.sleeps.Add(1)
	wake := f.mono + d
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if !f.ManualSleep {
		if d > 0 {
			f.Advance(d)
		}
		return nil
	}
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
