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
// repeats. Its chain, with Ahead 30 s, goes on too: traffic before the cut
// made it fetch twice what its safe distance holds, and it serves that
// much during the cut. The control, the same registry under the default
// window and without Ahead, must be refused during the cut, snowflake and
// chain IDs alike: the window and Ahead, not luck, carry the outage. Only
// counts are asserted, and every phase ends on counts or events: a slow
// host lengthens pauses but cannot turn a refusal into an ID.
func TestRideThroughOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *server) {
		if s.target == "" {
			t.Skip("a local database file has no connection to cut")
		}
		// The store records the default window: the control runs first.
		t.Run("default window", func(t *testing.T) {
			// issueThroughCut cuts the store until both generators were
			// refused, and fails the test if that does not come.
			r := issueThroughCut(t, s, 0, 0)
			if !errors.Is(r.firstErr, engine.ErrMachineIDLost) {
				t.Errorf("refused with %v, want ErrMachineIDLost", r.firstErr)
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
				t.Errorf("%d snowflake IDs refused in a cut of at least %v under a %v window (first: %v); want none", r.refused, rideCut, window, r.firstErr)
			}
			if r.during == 0 {
				t.Errorf("no snowflake ID issued during the cut")
			}
			if r.chain.refused != 0 || r.chain.during != rideHeld {
				t.Errorf("with Ahead %v the chain held %d IDs at the cut, then issued %d and refused %d (first: %v) of %d drawn during it; want all issued",
					ahead, r.held, r.chain.during, r.chain.refused, r.chain.firstErr, rideHeld)
			}
		})
	})
}

// rideCut is how long issueThroughCut keeps the store cut at least in the
// arm with the window: past the default window and its heartbeat, far
// inside 60 s. The control's cut lasts until it was refused.
const rideCut = 4 * time.Second

// rideHeld is how many chain IDs issueThroughCut draws before the cut, and
// with Ahead how many the chain must hold at the cut and how many it draws
// during it: twice the most a chain holds at its default safe distance
// (4,000). The warm-up goes on until the chain holds that many, however
// slowly the host lets the traffic that Ahead measures flow.
const rideHeld = 8_000

// chainBurst is how many chain IDs issueThroughCut draws per snowflake ID:
// many more chain IDs than snowflake IDs, so that the control's chain
// without Ahead, which holds its safe distance, runs dry within the cut.
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
	held      int64     // chain IDs fetched and not handed out at the cut
}

// issueThroughCut starts one registry on s through a fault proxy with the
// store's window w and its chains' Ahead ahead, and issues snowflake and
// chain IDs: before the cut until the chain issued rideHeld IDs and, with
// Ahead, holds rideHeld; then with the store cut, with Ahead until rideCut
// passed and the chain drew rideHeld more, without it until both
// generators were refused; then it restores the store and issues until IDs
// flow again. It fails the test on a repeated or decreasing ID.
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
	held := func() int64 {
		for _, g := range reg.Stats().Generators {
			if g.Kind == "chain" && g.Name == "ride" {
				return g.Ahead
			}
		}
		return 0
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
	// One round: a snowflake ID, then a burst of up to chains chain IDs up
	// to the first refusal. counting says whether the IDs are the cut's.
	round := func(counting bool, chains int) error {
		var first error
		for i, d := range []*drawn{sfd, chd} {
			n := 1
			if i == 1 {
				n = chains
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
	// Warm-up: traffic for Ahead to measure, until the chain holds what the
	// cut will take.
	began := time.Now()
	deadline := began.Add(hangGuard)
	for len(chd.ids) < rideHeld || (ahead > 0 && held() < rideHeld) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v of traffic before the cut (%d chain IDs drawn) the chain with Ahead %v holds %d IDs, fewer than %d: "+
				"it does not fetch Ahead's worth of its traffic", hangGuard, len(chd.ids), ahead, held(), rideHeld)
		}
		if err := round(false, chainBurst); err != nil {
			t.Fatalf("before the cut: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	r.held = held()
	warmDrawn := len(chd.ids)
	p.Cut()
	cut := time.Now()
	deadline = cut.Add(hangGuard)
	for {
		chains := chainBurst
		if ahead > 0 {
			// What the chain held, and no more: whether the cut's traffic
			// fits in it is then the chain's doing, not the host's speed.
			chains = min(chainBurst, rideHeld-r.chain.during-r.chain.refused)
			if chains == 0 && time.Since(cut) >= rideCut {
				break
			}
			if chains == 0 {
				chd.last = time.Now() // idle by design: no pause to report
			}
		} else if r.refused > 0 && r.chain.refused > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store cut for %v under window %v with Ahead %v: %d snowflake and %d chain IDs issued, %d and %d refused; "+
				"the cut should have ended long ago", hangGuard, w, ahead, r.during, r.chain.during, r.refused, r.chain.refused)
		}
		round(true, chains)
		time.Sleep(time.Millisecond)
	}
	cutFor := time.Since(cut)
	p.Restore()
	deadline = time.Now().Add(hangGuard)
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
			w, ahead, cutFor.Round(time.Millisecond), d.res.during, d.name, d.res.refused, d.res.firstErr, d.res.longestPause)
	}
	t.Logf("the chain held %d IDs at the cut, after %v of traffic before it (%d chain IDs drawn)", r.held, cut.Sub(began).Round(time.Millisecond), warmDrawn)
	return r
}
