package clock

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

// DefaultMaxBackwards is how far back a clock may step and still be waited
// out by a [Synchronizer] with no MaxWait set. Longer steps are errors: a
// generator that stalls callers for seconds is worse than one that fails fast.
const DefaultMaxBackwards = 10 * time.Millisecond

// Synchronizer waits for the clock to catch up with a time the generator has
// already used. It is used at run time,
// when the clock reads earlier than the last ID's timestamp, and at start-up,
// when the last timestamp saved for this machine ID is ahead of the clock.
type Synchronizer struct {
	Clock Clock
	// MaxWait is the longest step back that is waited out; zero means
	// DefaultMaxBackwards. Beyond it WaitUntil returns an error wrapping
	// engine.ErrClockBackwards that says by how much.
	MaxWait time.Duration
}

// WaitUntil returns once the clock reads target or later. If the clock is
// behind by more than MaxWait it returns at once with an error; if ctx ends
// first it returns ctx's error.
func (s Synchronizer) WaitUntil(ctx context.Context, target time.Time) error {
	c := s.Clock
	if c == nil {
		c = System
	}
	limit := s.MaxWait
	if limit <= 0 {
		limit = DefaultMaxBackwards
	}
	for {
		behind := target.Sub(c.Now())
		if behind <= 0 {
			return nil
		}
		if behind > limit {
			return &BackwardsError{Behind: behind, MaxWait: limit}
		}
		if err := c.Sleep(ctx, behind); err != nil {
			return fmt.Errorf("idforge: waiting %v for the clock: %w", behind, err)
		}
	}
}

// BackwardsError reports a clock step back too long to wait out. It matches
// engine.ErrClockBackwards with errors.Is.
type BackwardsError struct {
	Behind  time.Duration // how far the clock is behind the last used time
	MaxWait time.Duration // the longest step that would have been waited out
}

// Error says how far behind the clock is and how long a step is waited out.
func (e *BackwardsError) Error() string {
	return fmt.Sprintf("%v: clock is %v behind the last issued timestamp (waits out at most %v)",
		engine.ErrClockBackwards, e.Behind, e.MaxWait)
}

// Is makes errors.Is(err, engine.ErrClockBackwards) true.
func (e *BackwardsError) Is(target error) bool { return target == engine.ErrClockBackwards }
