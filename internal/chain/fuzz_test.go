package chain

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// FuzzSettings: any Settings is valid or refused with
// engine.ErrInvalidConfig; a valid one keeps every product and sum the
// chain forms with it inside int64 (twice the widest distance in IDs, a
// clock reading plus a window). Seeds: the values whose arithmetic once
// overflowed, and a negative Fence, which the registry resolves.
func FuzzSettings(f *testing.F) {
	big, small := int64(math.MaxInt64), int64(math.MinInt64)
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(1000), int64(2), int64(time.Second), int64(time.Hour), int64(10*time.Second), int64(time.Second))
	f.Add(big, big, big, big, big, big)
	f.Add(small, small, small, small, small, small)
	f.Add(int64(1<<32), int64(1<<28), int64(24*time.Hour), int64(7*24*time.Hour), int64(24*time.Hour), int64(24*time.Hour))
	f.Add(int64(1<<32+1), int64(1<<28+1), int64(24*time.Hour+1), int64(7*24*time.Hour+1), int64(24*time.Hour+1), int64(24*time.Hour+1))
	f.Add(int64(1), int64(1), int64(0), int64(0), int64(0), int64(-1))
	f.Add(int64(1), int64(1), int64(2*time.Second), int64(0), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, step, safeDistance, ahead, ttl, maxWait, fence int64) {
		s := segment.Settings{Step: step, SafeDistance: safeDistance, Ahead: time.Duration(ahead), TTL: time.Duration(ttl),
			MaxWait: time.Duration(maxWait), Fence: time.Duration(fence)}
		if err := Validate(s); err != nil && !errors.Is(err, engine.ErrInvalidConfig) {
			t.Fatalf("validate(%+v) = %v; want nil or ErrInvalidConfig", s, err)
		}
		c, err := resolve(s, Owned{})
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("resolve(%+v) = %v; want nil or ErrInvalidConfig", s, err)
			}
			return
		}
		if c.step < 1 || c.step > maxStep || c.safeDistance < 1 || c.safeDistance > c.maxDistance {
			t.Fatalf("resolve(%+v) accepted step %d, safe distance %d, max distance %d", s, c.step, c.safeDistance, c.maxDistance)
		}
		if c.maxDistance > math.MaxInt64/c.step/2 {
			t.Fatalf("resolve(%+v): 2 × step %d × distance %d overflows", s, c.step, c.maxDistance)
		}
		for _, d := range []time.Duration{c.ahead, c.ttl, c.maxWait, c.fence} {
			if d < 0 || d > maxTTL {
				t.Fatalf("resolve(%+v) accepted a duration %v outside [0, %v]", s, d, maxTTL)
			}
		}
		if c.fence > 0 && c.ahead > c.fence {
			t.Fatalf("resolve(%+v) accepted Ahead %v beyond Fence %v", s, c.ahead, c.fence)
		}
	})
}
