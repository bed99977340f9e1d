package timebase_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/internal/timebase"
)

var start = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestSynchronizerWaitsOutShortSteps(t *testing.T) {
	f := clocktest.NewFake(start)
	s := timebase.Synchronizer{Clock: f, MaxWait: 10 * time.Millisecond}
	f.Advance(-4 * time.Millisecond)
	if err := s.WaitUntil(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	if f.Now().Before(start) || f.Sleeps() == 0 {
		t.Fatalf("returned at %v after %d sleeps, before %v", f.Now(), f.Sleeps(), start)
	}
}

func TestSynchronizerRefusesLongSteps(t *testing.T) {
	f := clocktest.NewFake(start)
	f.Advance(-5 * time.Second)
	err := timebase.Synchronizer{Clock: f}.WaitUntil(context.Background(), start)
	var be *timebase.BackwardsError
	if !errors.Is(err, engine.ErrClockBackwards) || !errors.As(err, &be) {
		t.Fatalf("5 s back: %v, want a *BackwardsError matching ErrClockBackwards", err)
	}
	if be.Behind != 5*time.Second || be.MaxWait != timebase.DefaultMaxBackwards || !strings.Contains(err.Error(), "5s behind") {
		t.Fatalf("error %+v / %q does not say by how much", be, err)
	}
	if f.Sleeps() != 0 {
		t.Fatalf("slept %d times before refusing", f.Sleeps())
	}
}

func TestSynchronizerHonoursContext(t *testing.T) {
	f := clocktest.NewFake(start)
	f.ManualSleep = true
	f.Advance(-time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (timebase.Synchronizer{Clock: f}).WaitUntil(ctx, start); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestCachedNeverAheadOfSystem(t *testing.T) {
	c := timebase.NewCached(time.Millisecond)
	defer c.Close()
	for range 1000 {
		cached := c.UnixNano()
		if now := time.Now().UnixNano(); cached > now {
			t.Fatalf("cached clock %d ahead of the system clock %d", cached, now)
		}
	}
	first := c.UnixNano()
	for c.UnixNano() == first {
		time.Sleep(time.Millisecond) // the refresh goroutine moves it on
	}
	if got := c.Now().UnixNano(); got < first {
		t.Fatalf("Now %d went back from %d", got, first)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A clock stepped back a few milliseconds is waited out; a long step is an
// error that says by how much.
func ExampleSynchronizer() {
	f := clocktest.NewFake(start)
	sync := timebase.Synchronizer{Clock: f, MaxWait: 10 * time.Millisecond}

	f.Advance(-3 * time.Millisecond)
	fmt.Println(sync.WaitUntil(context.Background(), start))

	f.Advance(-2 * time.Second)
	fmt.Println(sync.WaitUntil(context.Background(), start))
	// Output:
	// <nil>
	// idforge: clock moved backwards: clock is 2s behind the last issued timestamp (waits out at most 10ms)
}
