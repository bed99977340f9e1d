package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
)

var start = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// A Steady time base follows the monotonic reading: a wall step back of any
// size is not seen, a wall step forward is followed, and a step of the
// whole fake clock (Advance with a negative duration) is seen as it is.
func TestSteadyFollowsWallForwardOnly(t *testing.T) {
	f := clocktest.NewFake(start)
	s := clock.Steady(f)
	if clock.Steady(s) != s {
		t.Fatal("Steady of a Steady clock made a second time base")
	}
	want := start
	check := func(what string) {
		t.Helper()
		if got := s.Now(); !got.Equal(want) {
			t.Fatalf("%s: Steady reads %v, want %v", what, got, want)
		}
	}
	check("at start")
	for _, step := range []time.Duration{50 * time.Millisecond, 5 * time.Second, time.Hour} {
		f.StepWall(-step)
		check("wall stepped back")
		f.Advance(time.Millisecond)
		want = want.Add(time.Millisecond)
		check("after a millisecond")
	}
	f.StepWall(3 * time.Hour)
	want = f.Now()
	check("wall stepped past the time base")
	f.Advance(-time.Second)
	want = want.Add(-time.Second)
	check("whole clock stepped back")
	if err := s.Sleep(context.Background(), time.Second); err != nil || !s.Now().Equal(want.Add(time.Second)) {
		t.Fatalf("Sleep on the fake: %v, now %v", err, s.Now())
	}
}

// A clock without a monotonic reading is its own time base.
func TestSteadyOfPlainClock(t *testing.T) {
	var c clock.Clock = struct{ clock.Clock }{clocktest.NewFake(start)}
	if clock.Steady(c) != c {
		t.Fatal("Steady wrapped a clock that has no monotonic reading")
	}
}

// The system time base starts at the wall clock and never reads backwards.
func TestSteadySystem(t *testing.T) {
	before := time.Now()
	s := clock.Steady(nil)
	last := s.Now()
	if last.Before(before) {
		t.Fatalf("Steady(System) starts at %v, before the wall clock's %v", last, before)
	}
	for range 1000 {
		now := s.Now()
		if now.Before(last) {
			t.Fatalf("Steady(System) read %v after %v", now, last)
		}
		last = now
	}
}
