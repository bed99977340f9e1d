// Package segtest holds [Fake], an in-memory segment distributor with a
// latency and an outage switch, for the module's own unit tests and
// benchmarks of the chains, the registry and the server. Stores check the
// contract with engine/segment/segmenttest.
package segtest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// Fake is an in-memory [segment.Distributor] for one sequence. It is safe
// for concurrent use; give every chain or generator under test its own Fake,
// or share one to play several instances sharing a store.
type Fake struct {
	mu      sync.Mutex
	max     int64
	latency atomic.Int64 // time.Duration
	down    atomic.Bool
	calls   atomic.Int64
}

var _ segment.Distributor = (*Fake)(nil)

// NewFake returns an in-memory distributor whose sequence starts after
// start (the first range of step s is (start, start+s]), up and answering
// at once; [Fake.SetLatency] and [Fake.SetDown] change that.
func NewFake(start int64) *Fake { return &Fake{max: start} }

// Confirmed is the zero time: the fake confirms nothing beyond the answers
// of NextMaxID.
func (f *Fake) Confirmed() time.Time { return time.Time{} }

// NextMaxID advances the sequence by step after the configured latency. It
// fails with an error wrapping engine.ErrStoreUnavailable while the fake is
// down, with ctx's error when ctx ends first, and with an error wrapping
// engine.ErrInvalidConfig when step is not positive. A failed call takes no
// IDs.
func (f *Fake) NextMaxID(ctx context.Context, step int64) (int64, error) {
	f.calls.Add(1)
	if step <= 0 {
		return 0, fmt.Errorf("%w: segtest: step %d must be positive", engine.ErrInvalidConfig, step)
	}
	if d := time.Duration(f.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("segtest: NextMaxID: %w", err)
	}
	if f.down.Load() {
		return 0, fmt.Errorf("%w: segtest: fake store is down", engine.ErrStoreUnavailable)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.max > math.MaxInt64-step {
		return 0, fmt.Errorf("%w: segtest: %d + step %d", engine.ErrIDOverflow, f.max, step)
	}
	f.max += step
	return f.max, nil
}

// SetDown switches the outage on or off; calls made while it is on fail.
func (f *Fake) SetDown(down bool) { f.down.Store(down) }

// SetLatency changes how long each call sleeps before answering, like a
// store at the other end of a network.
func (f *Fake) SetLatency(d time.Duration) { f.latency.Store(int64(d)) }

// Calls reports how many times NextMaxID was called, failed calls included.
func (f *Fake) Calls() int64 { return f.calls.Load() }

// Max reports the last maximum handed out (the start before the first call).
func (f *Fake) Max() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}
