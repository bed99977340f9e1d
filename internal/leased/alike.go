package leased

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// The lease words an instance and waits out a clock as the distributors
// and the snowflake generator do (engine/internal/distcheck and
// engine/internal/timebase, which this package, outside engine/, cannot
// import); it checks its arguments with machine.ValidateDistribute, the
// distributors' own check.

// instanceName describes an instance in errors and logs as the
// distributors do: "namespace/id", marked "(stable)" for a stable instance.
func instanceName(namespace, id string, stable bool) string {
	if stable {
		return namespace + "/" + id + " (stable)"
	}
	return namespace + "/" + id
}

// fits refuses a machine ID outside [0, 2^machineBits), naming the source
// that gave it.
func fits(id int64, machineBits int, source string) error {
	if id < 0 {
		return fmt.Errorf("%w: machine: %s gives negative machine ID %d", engine.ErrInvalidConfig, source, id)
	}
	if limit := int64(1) << machineBits; id >= limit {
		return fmt.Errorf("%w: machine: %s gives machine ID %d, which does not fit %d machine bits (at most %d)",
			engine.ErrMachineIDOverflow, source, id, machineBits, limit-1)
	}
	return nil
}

// defaultMaxBackwards is how far back a clock may step and still be waited
// out when no other limit is set, as the generator's default MaxBackwards.
const defaultMaxBackwards = 10 * time.Millisecond

// waitUntil returns once c reads target or later. If c is behind by more
// than maxWait it returns at once with an error wrapping
// engine.ErrClockBackwards that says by how much; if ctx ends first, ctx's
// error.
func waitUntil(ctx context.Context, c clock.Clock, target time.Time, maxWait time.Duration) error {
	for {
		behind := target.Sub(c.Now())
		if behind <= 0 {
			return nil
		}
		if behind > maxWait {
			return fmt.Errorf("%w: clock is %v behind the last issued timestamp (waits out at most %v)",
				engine.ErrClockBackwards, behind, maxWait)
		}
		if err := c.Sleep(ctx, behind); err != nil {
			return fmt.Errorf("idforge: waiting %v for the clock: %w", behind, err)
		}
	}
}
