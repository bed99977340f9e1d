// Package distcheck holds the argument checks every machine-ID distributor
// makes, so the fixed distributors of engine/machine and the stores reject
// the same inputs with the same errors (the lease, in internal/leased,
// words its own checks alike). It imports engine.
package distcheck

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

// MaxMachineBits bounds the machineBits a distribution accepts: 2^31 machine
// IDs is far beyond any deployment and fits every store's integer column.
const MaxMachineBits = 31

// Instance reports an empty namespace or instance ID, with an error wrapping
// engine.ErrInvalidConfig.
func Instance(namespace, id string) error {
	switch {
	case namespace == "":
		return fmt.Errorf("%w: machine: instance %q has an empty namespace", engine.ErrInvalidConfig, id)
	case id == "":
		return fmt.Errorf("%w: machine: empty instance ID in namespace %q", engine.ErrInvalidConfig, namespace)
	}
	return nil
}

// Distribute checks the arguments of a Distribute call: a valid instance,
// machineBits in [1, MaxMachineBits] and a positive safe-guard duration
// (zero would let anyone reclaim a live ID at once). Errors wrap
// engine.ErrInvalidConfig.
func Distribute(namespace, id string, machineBits int, safeGuard time.Duration) error {
	if err := Instance(namespace, id); err != nil {
		return err
	}
	if machineBits < 1 || machineBits > MaxMachineBits {
		return fmt.Errorf("%w: machine: machineBits %d outside [1, %d]", engine.ErrInvalidConfig, machineBits, MaxMachineBits)
	}
	if safeGuard <= 0 {
		return fmt.Errorf("%w: machine: safe-guard duration %v must be positive", engine.ErrInvalidConfig, safeGuard)
	}
	return nil
}

// Fits reports a machine ID outside [0, 2^machineBits), naming the
// source that gave it.
func Fits(id int64, machineBits int, source string) error {
	if id < 0 {
		return fmt.Errorf("%w: machine: %s gives negative machine ID %d", engine.ErrInvalidConfig, source, id)
	}
	if limit := int64(1) << machineBits; id >= limit {
		return fmt.Errorf("%w: machine: %s gives machine ID %d, which does not fit %d machine bits (at most %d)",
			engine.ErrMachineIDOverflow, source, id, machineBits, limit-1)
	}
	return nil
}

// Name describes an instance in errors and logs: "namespace/id", marked
// "(stable)" for a stable instance.
func Name(namespace, id string, stable bool) string {
	if stable {
		return namespace + "/" + id + " (stable)"
	}
	return namespace + "/" + id
}
