package leased

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
)

// FuzzLeaseSettings: any SafeGuard, Heartbeat, SkewMargin and Reservation
// are valid or refused with engine.ErrInvalidConfig; valid ones keep the
// heartbeat at or above its floor, the safe-guard within its bound, and
// the reservation within the safe-guard less the margin, so that no sum of
// them with a clock reading overflows. Seeds: a SafeGuard of the largest
// Duration with the margin off (once accepted), a 1 ns heartbeat (once
// accepted: it burnt a core and lost its own lease).
func FuzzLeaseSettings(f *testing.F) {
	big, small := int64(math.MaxInt64), int64(math.MinInt64)
	f.Add(int64(0), int64(0), int64(0), int64(0))
	f.Add(big, int64(0), int64(-1), int64(0))
	f.Add(big, int64(0), int64(-1), big)
	f.Add(int64(0), int64(1), int64(0), int64(0))
	f.Add(int64(0), int64(99*time.Millisecond), int64(0), int64(0))
	f.Add(small, small, small, small)
	f.Add(big, big, big, big)
	f.Add(int64(7*24*time.Hour), int64(100*time.Millisecond), int64(-1), int64(7*24*time.Hour))
	f.Fuzz(func(t *testing.T, safeGuard, heartbeat, margin, reserve int64) {
		s := LeaseSettings{Lease: machine.Settings{SafeGuard: time.Duration(safeGuard), Heartbeat: time.Duration(heartbeat),
			SkewMargin: time.Duration(margin)}, Reservation: time.Duration(reserve)}
		c, err := s.resolve()
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("resolve(%+v) = %v; want nil or ErrInvalidConfig", s, err)
			}
			return
		}
		switch {
		case c.safeGuard <= 0 || c.safeGuard > machine.MaxSafeGuard:
			t.Fatalf("resolve(%+v) accepted SafeGuard %v", s, c.safeGuard)
		case c.heartbeat < MinHeartbeat || c.heartbeat >= c.safeGuard-c.margin:
			t.Fatalf("resolve(%+v) accepted Heartbeat %v", s, c.heartbeat)
		case c.margin < 0 || c.margin >= c.safeGuard:
			t.Fatalf("resolve(%+v) accepted SkewMargin %v", s, c.margin)
		case c.reserve < 0 || c.reserve > c.safeGuard-c.margin:
			t.Fatalf("resolve(%+v) accepted a reservation of %v", s, c.reserve)
		}
		if alone, _ := c.alone(); alone <= 0 || alone > machine.MaxSafeGuard {
			t.Fatalf("resolve(%+v): issues alone for %v", s, alone)
		}
	})
}
