package leased

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// The lease words an instance and checks its arguments as the
// machine.Distributor contract does, and waits out a clock as the snowflake
// generator does (the engine shares those in engine/internal/distcheck and
// engine/internal/timebase, which this package, outside engine/, cannot
// import): a store's refusal, a generator's and the lease's read alike.

// maxMachineBits is the widest machine ID a distributor hands out.
const maxMachineBits = 31

// maxSafeGuard bounds the safe-guard duration, as the distributors do.
const maxSafeGuard = 7 * 24 * time.Hour

// instanceName describes an instance in errors and logs: "namespace/id",
// marked "(stable)" for a stable instance.
func instanceName(namespace, id string, stable bool) string {
	if stable {
		return namespace + "/" + id + " (stable)"
	}
	return namespace + "/" + id
}

// checkInstance refuses an instance without a namespace or an ID.
func checkInstance(namespace, id string) error {
	switch {
	case namespace == "":
		return fmt.Errorf("%w: machine: instance %q has an empty namespace", engine.ErrInvalidConfig, id)
	case id == "":
		return fmt.Errorf("%w: machine: empty instance ID in namespace %q", engine.ErrInvalidConfig, namespace)
	}
	return nil
}

// checkDistribute refuses what a distributor would refuse in Distribute's
// arguments, before the lease asks it anything.
func checkDistribute(namespace, id string, machineBits int, safeGuard time.Duration) error {
	if err := checkInstance(namespace, id); err != nil {
		return err
	}
	if machineBits < 1 || machineBits > maxMachineBits {
		return fmt.Errorf("%w: machine: machineBits %d outside [1, %d]", engine.ErrInvalidConfig, machineBits, maxMachineBits)
	}
	if safeGuard <= 0 || safeGuard > maxSafeGuard {
		return fmt.Errorf("%w: machine: safe-guard duration %v outside (0, %v]", engine.ErrInvalidConfig, safeGuard, maxSafeGuard)
	}
	return nil
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
