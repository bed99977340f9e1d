package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/tests/testdb"
)

// TestRideThroughOutage: one registry on an initialised store whose
// ride-through window is 60 s goes on issuing snowflake IDs while the store
// is cut for longer than the default 1 s window: none is refused and none
// repeats. Its chain, with Ahead 30 s, goes on too: it fetched more than
// the cut's worth of its traffic before the cut. The control, the same
// registry under the default window and without Ahead, must be refused
// during the cut, snowflake and chain IDs alike: the window and Ahead, not
// luck, carry the outage. Only counts are asserted; a slow host lengthens
// pauses but cannot turn a refusal into an ID.
func TestRideThroughOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *server) {
		if s.target == "" {
			t.Skip("a local database file has no connection to cut")
		}
		// The store records the default window: the control runs first.
		t.Run("default window", func(t *testing.T) {
			r := issueThroughCut(t, s, 0, 0)
			if r.refused == 0 {
				t.Errorf("no snowflake ID refused in a %v cut under the default window; want refusals once its 1 s runs out", rideCut)
			}
			if !errors.Is(r.firstErr, engine.ErrMachineIDLost) {
				t.Errorf("refused with %v, want ErrMachineIDLost", r.firstErr)
			}
			if r.chain.refused == 0 {
				t.Errorf("no chain ID refused in a %v cut without Ahead; want refusals once its safe distance runs out", rideCut)
			}
			// The store's error is named only once a fetch failed: a
			// fetch over a connection the cut left open is still waiting.
			if !errors.Is(r.chain.firstErr, engine.ErrSegmentExhausted) {
				t.Errorf("chain refused with %v, want ErrSegmentExhausted", r.chain.firstErr)
			}
		})
		const window = 60 * time.Second
		// -force: the control's lease reserved under the old window; the
		// new one is longer, so nothing it issued can be overtaken.
		if err := s.setRideThrough(t, window); err != nil {
			t.Fatalf("recording a %v window: %v", window, err)
		}
		t.Run("60s window", func(t *testing.T) {
			const ahead = 30 * time.Second
			r := issueThroughCut(t, s, window, ahead)
			if r.refused != 0 {
				t.Errorf("%d snowflake IDs refused in a %v cut under a %v window (first: %v); want none", r.refused, rideCut, window, r.firstErr)
			}
			if r.during == 0 {
				t.Errorf("no snowflake ID issued during the cut")
			}
			if r.chain.refused != 0 {
				t.Errorf("%d chain IDs refused in a %v cut with Ahead %v (first: %v); want none", r.chain.refused, rideCut, ahead, r.chain.firstErr)
			}
			if r.chain.during == 0 {
				t.Errorf("no chain ID issued during the cut")
			}
		})
	})
}

// rideCut is how long issueThroughCut keeps the store cut: past the
// default window and its heartbeat, far inside 60 s.
const rideCut = 4 * time.Second

// rideWarmup is how long issueThroughCut issues before the cut. A chain's
// Ahead measures the rate with a weighted mean of 10 s time constant, which
// reaches a quarter of the rate after 3 s: 30 s ahead then holds about 7 s
// of traffic (less up to a second before its worker tops up), past the cut.
const rideWarmup = 3 * time.Second

// chainBurst is how many chain IDs issueThroughCut draws per snowflake ID:
// several thousand a second, so that a chain without Ahead, which holds its
// safe distance (2,000 to 4,000 IDs), runs dry well inside the cut.
const chainBurst = 10

// genResult is what one generator did through the cut.
type genResult struct {
	during, refused int
	firstErr        error
	longestPause    time.Duration
}

type cutResult struct {
	genResult           // the snowflake generator
	chain     genResult // the chain named "ride"
}

// issueThroughCut starts one registry on s through a fault proxy with the
// store's window w and its chains' Ahead ahead, issues snowflake and chain
// IDs for rideWarmup, cuts the store for rideCut while it goes on issuing,
// restores it and issues until IDs flow again. It fails the test on a
// repeated or decreasing ID.
func issueThroughCut(t *testing.T, s *server, w, ahead time.Duration) cutResult {
	ctx := t.Context()
	p := startProxy(t, s.target)
	// A dry chain refuses after MaxWait: short, so that the control's
	// refusals are counted rather than waited out.
	reg, err := idforge.New(ctx, idforge.Settings{Store: s.openWindow(t, p.Addr(), w), Namespace: testdb.UniqueName("ride-"), Logger: quiet,
		Chain: segment.Settings{Ahead: ahead, MaxWait: 100 * time.Millisecond}})
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
	ch, err := reg.Generator(ctx, "chain", "ride")
	if err != nil {
		t.Fatal(err)
	}
	var r cutResult
	type drawn struct {
		name string
		g    engine.Generator
		res  *genResult
		ids  []int64
		last time.Time
	}
	sfd := &drawn{name: "snowflake", g: sf, res: &r.genResult, last: time.Now()}
	chd := &drawn{name: "chain", g: ch, res: &r.chain, last: time.Now()}
	issue := func(d *drawn) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		id, err := d.g.NextID(cctx)
		if err != nil {
			return err
		}
		if n := len(d.ids); n > 0 && id <= d.ids[n-1] {
			t.Fatalf("%s ID %d after %d: not strictly increasing", d.name, id, d.ids[n-1])
		}
		d.ids = append(d.ids, id)
		now := time.Now()
		d.res.longestPause = max(d.res.longestPause, now.Sub(d.last))
		d.last = now
		return nil
	}
	// One round: a snowflake ID, then a burst of chain IDs up to the
	// first refusal. counting says whether the IDs are the cut's.
	round := func(counting bool) error {
		var first error
		for i, d := range []*drawn{sfd, chd} {
			n := 1
			if i == 1 {
				n = chainBurst
			}
			for range n {
				err := issue(d)
				switch {
				case err != nil && !counting:
					return fmt.Errorf("%s: %w", d.name, err)
				case err == nil && counting:
					d.res.during++
				case err != nil:
					if d.res.refused == 0 {
						d.res.firstErr = err
					}
					d.res.refused++
				}
				if err != nil {
					first = cmp.Or(first, err)
					break
				}
			}
		}
		return first
	}
	for end := time.Now().Add(rideWarmup); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if err := round(false); err != nil {
			t.Fatalf("before the cut: %v", err)
		}
	}
	p.Cut()
	for end := time.Now().Add(rideCut); time.Now().Before(end); time.Sleep(time.Millisecond) {
		round(true)
	}
	p.Restore()
	deadline := time.Now().Add(hangGuard)
	for _, d := range []*drawn{sfd, chd} {
		for issue(d) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("no %s ID %v after the restore", d.name, hangGuard)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !slices.IsSorted(d.ids) || len(slices.Compact(slices.Clone(d.ids))) != len(d.ids) {
			t.Fatalf("a %s ID repeated", d.name)
		}
		t.Logf("window %v, Ahead %v, store cut %v: %d %s IDs issued during the cut, %d refused (first: %v), longest pause between two IDs %v",
			w, ahead, rideCut, d.res.during, d.name, d.res.refused, d.res.firstErr, d.res.longestPause)
	}
	return r
}
