package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

// caller draws IDs from a chain at a steady rate of the fake clock: each
// tick it moves the clock on and takes rate × tick IDs, checking they keep
// increasing.
type caller struct {
	t    *testing.T
	c    *chain.Chain
	clk  *clocktest.Fake
	last int64
}

// run draws at perSecond for d of fake time, tick by tick, and returns how
// many IDs it got and the first refusal. A refusal ends the run: a caller
// of a dry chain waits up to a second of real time per tick.
func (r *caller) run(perSecond int, tick, d time.Duration) (int, error) {
	r.t.Helper()
	perTick := int(int64(perSecond) * int64(tick) / int64(time.Second))
	got := 0
	for elapsed := time.Duration(0); elapsed < d; elapsed += tick {
		r.clk.Advance(tick)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for range perTick {
			id, err := r.c.NextID(ctx)
			if err != nil {
				cancel()
				return got, err
			}
			if id <= r.last {
				r.t.Fatalf("ID %d after %d: not strictly increasing", id, r.last)
			}
			r.last = id
			got++
		}
		cancel()
	}
	return got, nil
}

// A chain that holds Ahead's worth of a steady rate serves through an
// outage shorter than Ahead; the same chain without Ahead runs dry.
func TestChainAheadRidesOutOutage(t *testing.T) {
	const (
		rate   = 1000 // IDs per second of the fake clock
		tick   = 100 * time.Millisecond
		outage = 60 * time.Second
		step   = 1000
	)
	for _, tc := range []struct {
		name  string
		ahead time.Duration
	}{
		{"Ahead 70s", 70 * time.Second},
		{"Ahead 0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
			f := segtest.NewFake(0)
			set := segment.Settings{Step: step, Ahead: tc.ahead}
			own := chain.Owned{Clock: clk, PrefetchPeriod: time.Millisecond, HungerWindow: time.Second}
			if tc.ahead == 0 {
				// The test draws faster in real time than the worker
				// refills, so callers go hungry and widen the distance;
				// capped, the control cannot hold 60 s by that accident.
				own.MaxPrefetchDistance = 16
			}
			c := newChain(t, f, set, own)
			r := &caller{t: t, c: c, clk: clk}

			// Twenty rate windows of steady traffic: the measured rate
			// settles at 1,000 IDs/s, the target at 70 segments.
			if _, err := r.run(rate, tick, 200*time.Second); err != nil {
				t.Fatalf("store up: %v", err)
			}
			wantDistance := int64(2) // SafeDistance
			if tc.ahead > 0 {
				wantDistance = int64(rate*tc.ahead.Seconds()/step) - 1 // the measured rate may fall just short
			}
			eventually(t, "the chain holds its target", func() bool {
				s := c.Stats()
				return s.PrefetchDistance >= wantDistance && s.Ahead >= s.PrefetchDistance*s.Step
			})
			held := c.Stats().Ahead
			t.Logf("at the outage start: %+v", c.Stats())

			f.SetDown(true)
			served, err := r.run(rate, tick, outage)
			f.SetDown(false)
			want := int(rate * outage.Seconds())
			if tc.ahead >= outage {
				if err != nil || served != want {
					t.Fatalf("Ahead %v, outage %v: served %d of %d IDs, then %v (held %d at its start)", tc.ahead, outage, served, want, err, held)
				}
				return
			}
			if err == nil || !errors.Is(err, engine.ErrSegmentExhausted) {
				t.Fatalf("Ahead 0: the outage ended with %v after %d IDs (held %d at its start); want the chain run dry", err, served, held)
			}
			// At most twice the capped distance: what the chain can hold.
			if limit := 2 * own.MaxPrefetchDistance * step; int64(served) > limit {
				t.Errorf("Ahead 0: served %d IDs during the outage, more than the %d the chain can hold", served, limit)
			}
		})
	}
}

// The target follows traffic down: after the rate falls the chain holds
// Ahead's worth of the new rate, not of the old one, and an idle chain's
// distance falls back to the safe distance.
func TestChainAheadFollowsTraffic(t *testing.T) {
	const step = 100
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	f := segtest.NewFake(0)
	c := newChain(t, f, segment.Settings{Step: step, SafeDistance: 2, Ahead: 10 * time.Second},
		chain.Owned{Clock: clk, PrefetchPeriod: time.Millisecond})
	r := &caller{t: t, c: c, clk: clk}

	// 1,000 IDs/s × 10 s: 100 segments of 100.
	if _, err := r.run(1000, 100*time.Millisecond, 100*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chain holds 10 s of 1,000 IDs/s", func() bool {
		s := c.Stats()
		return s.PrefetchDistance >= 90 && s.Ahead >= s.PrefetchDistance*s.Step
	})
	high := c.Stats()

	// 100 IDs/s × 10 s: 10 segments. The chain drains what it held at the
	// old rate and tops up to twice the new target at most.
	const low = 20 // segments: twice the new need, for the measured rate's noise
	eventually(t, "the target and what the chain holds fall with the rate", func() bool {
		if _, err := r.run(100, time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		return s.PrefetchDistance <= low && s.Ahead <= 2*low*step
	})
	if s := c.Stats(); s.PrefetchDistance < 2 || s.Ahead >= high.Ahead/2 {
		t.Fatalf("after the rate fell tenfold: %+v; before: %+v", s, high)
	}

	// Nobody draws: the measured rate decays and the distance returns to
	// the safe distance (what is held stays, as nobody takes it).
	eventually(t, "an idle chain's distance falls to the safe distance", func() bool {
		clk.Advance(time.Second)
		return c.Stats().PrefetchDistance == 2
	})
}
