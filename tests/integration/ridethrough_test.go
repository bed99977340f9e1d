package integration

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/storeadmin"
	"github.com/idforge/idforge/tests/testdb"
)

// TestRideThroughOutage: one registry on an initialised store whose
// ride-through window is 60 s goes on issuing snowflake IDs while the store
// is cut for longer than the default 1 s window: none is refused and none
// repeats. The control, the same registry under the default window, must
// be refused during the cut: the window, not luck, carries the outage.
// Only counts are asserted; a slow host lengthens pauses but cannot turn a
// refusal into an ID.
func TestRideThroughOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *server) {
		if s.target == "" {
			t.Skip("a local database file has no connection to cut")
		}
		// The store records the default window: the control runs first.
		t.Run("default window", func(t *testing.T) {
			r := issueThroughCut(t, s, 0)
			if r.refused == 0 {
				t.Errorf("no snowflake ID refused in a %v cut under the default window; want refusals once its 1 s runs out", rideCut)
			}
			if !errors.Is(r.firstErr, engine.ErrMachineIDLost) {
				t.Errorf("refused with %v, want ErrMachineIDLost", r.firstErr)
			}
		})
		const window = 60 * time.Second
		ad, ok := s.open(t, "").(interface{ Admin() storeadmin.Ops })
		if !ok {
			t.Fatal("the store has no operator commands")
		}
		// -force: the control's lease reserved under the old window; the
		// new one is longer, so nothing it issued can be overtaken.
		if _, err := ad.Admin().SetRideThrough(t.Context(), window, true); err != nil {
			t.Fatalf("recording a %v window: %v", window, err)
		}
		t.Run("60s window", func(t *testing.T) {
			r := issueThroughCut(t, s, window)
			if r.refused != 0 {
				t.Errorf("%d snowflake IDs refused in a %v cut under a %v window (first: %v); want none", r.refused, rideCut, window, r.firstErr)
			}
			if r.during == 0 {
				t.Errorf("no snowflake ID issued during the cut")
			}
		})
	})
}

// rideCut is how long issueThroughCut keeps the store cut: past the
// default window and its heartbeat, far inside 60 s.
const rideCut = 4 * time.Second

type cutResult struct {
	during, refused int
	firstErr        error
	longestPause    time.Duration
}

// issueThroughCut starts one registry on s through a fault proxy with the
// store's window w, issues snowflake IDs, cuts the store for rideCut while
// it goes on issuing, restores it and issues until IDs flow again. It fails
// the test on a repeated or decreasing ID.
func issueThroughCut(t *testing.T, s *server, w time.Duration) cutResult {
	ctx := t.Context()
	p := startProxy(t, s.target)
	reg, err := idforge.New(ctx, idforge.Settings{Store: s.openWindow(t, p.Addr(), w), Namespace: testdb.UniqueName("ride-"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the proxy is restored (cleanups run last first).
	t.Cleanup(func() { reg.Close() })
	t.Cleanup(p.Restore)
	sf, err := reg.Generator(ctx, "snowflake", "")
	if err != nil {
		t.Fatal(err)
	}
	var (
		ids  []int64
		r    cutResult
		last = time.Now()
	)
	issue := func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		id, err := sf.NextID(cctx)
		if err != nil {
			return err
		}
		if n := len(ids); n > 0 && id <= ids[n-1] {
			t.Fatalf("snowflake ID %d after %d: not strictly increasing", id, ids[n-1])
		}
		ids = append(ids, id)
		now := time.Now()
		r.longestPause = max(r.longestPause, now.Sub(last))
		last = now
		return nil
	}
	for range 100 {
		if err := issue(); err != nil {
			t.Fatalf("before the cut: %v", err)
		}
	}
	p.Cut()
	for end := time.Now().Add(rideCut); time.Now().Before(end); time.Sleep(time.Millisecond) {
		switch err := issue(); {
		case err == nil:
			r.during++
		case r.refused == 0:
			r.firstErr = err
			r.refused++
		default:
			r.refused++
		}
	}
	p.Restore()
	deadline := time.Now().Add(hangGuard)
	for issue() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no snowflake ID %v after the restore", hangGuard)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("a snowflake ID repeated")
	}
	t.Logf("window %v, store cut %v: %d IDs issued during the cut, %d refused (first: %v), longest pause between two IDs %v",
		w, rideCut, r.during, r.refused, r.firstErr, r.longestPause)
	return r
}
