package chain

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/segment"
)

// confirmer is a Distributor whose store checks, in every operation, that it
// has not forgotten what it handed out (engine/sqlstore's and
// engine/redisstore's): Confirmed is when the newest operation that found
// it so was sent, heartbeats of a machine-ID lease on the same store
// included.
type confirmer interface {
	Confirmed() time.Time
}

// fence withholds the IDs a chain or generator holds once its store has not
// confirmed them for longer than the window ([segment.Settings].Fence).
type fence struct {
	window time.Duration
	clock  clock.Clock
	d      confirmer // nil: only the generator's own fetches confirm
	own    atomic.Int64
	until  atomic.Int64 // Unix ns: serving is confirmed up to here
}

func newFence(window time.Duration, c clock.Clock, d segment.Distributor) *fence {
	if window <= 0 {
		return nil
	}
	f := &fence{window: window, clock: c}
	f.d, _ = d.(confirmer)
	return f
}

// confirm records a fetch sent at sent that succeeded.
func (f *fence) confirm(sent time.Time) {
	ns := sent.UnixNano()
	for {
		old := f.own.Load()
		if ns <= old || f.own.CompareAndSwap(old, ns) {
			break
		}
	}
	f.extend(ns)
}

func (f *fence) extend(confirmedNs int64) {
	until := confirmedNs + int64(f.window)
	for {
		old := f.until.Load()
		if until <= old || f.until.CompareAndSwap(old, until) {
			return
		}
	}
}

// last returns when the store last confirmed, in Unix ns (0: never).
func (f *fence) last() int64 {
	last := f.own.Load()
	if f.d != nil {
		if t := f.d.Confirmed(); !t.IsZero() {
			last = max(last, t.UnixNano())
		}
	}
	return last
}

// check returns nil while the store confirmed within the window, and an
// error wrapping engine.ErrStoreUnavailable after it.
func (f *fence) check(name string) error {
	now := f.clock.Now().UnixNano()
	if now <= f.until.Load() {
		return nil
	}
	last := f.last()
	f.extend(last)
	if now <= f.until.Load() {
		return nil
	}
	since := "never"
	if last > 0 {
		since = "for " + time.Duration(now-last).Round(time.Millisecond).String()
	}
	return fmt.Errorf("%w: segment %q: the store has not confirmed the IDs held (%s, over Settings.Fence %v): they are withheld until it does",
		engine.ErrStoreUnavailable, name, since, f.window)
}

// stale reports whether half the window passed since the store last
// confirmed: time for an idle chain to confirm with a fetch of its own.
func (f *fence) stale() bool {
	return f.clock.Now().UnixNano()-f.last() > int64(f.window/2)
}
