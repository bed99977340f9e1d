package clock

import (
	"context"
	"time"
)

// Clock tells the time and sleeps. Sleep returns ctx.Err() if ctx ends first.
//
// A clock that also has a method `Elapsed() time.Duration`, a monotonic
// reading (one that moves only forward as time passes, whatever is done to
// the wall clock), lets a running generator ignore wall-clock steps back:
// it keeps time on that reading, re-synced forward to the wall time (see
// [Steady]). System and the clocktest fake have it.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// System is the operating system's wall clock; its monotonic reading is
// the time since the process started.
var System Clock = systemClock{}

type systemClock struct{}

// processStart carries the monotonic reading Elapsed counts from.
var processStart = time.Now()

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Elapsed() time.Duration { return time.Since(processStart) }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
