// Package distcheck holds the argument checks every machine-ID distributor
// makes, so the fixed distributors of engine/machine and the stores reject
// the same inputs with the same errors (the lease, in internal/leased,
// words its own checks alike). It imports engine.
package distcheck

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/idforge/idforge/engine"
)

// MaxMachineBits bounds the machineBits a distribution accepts: 2^31 machine
// IDs is far beyond any deployment and fits every store's integer column.
const MaxMachineBits = 31

// MaxSafeGuard bounds the safe-guard duration (machine.Settings.SafeGuard)
// a distribution accepts: a week of silence before a machine ID may be
// reclaimed is beyond any outage worth riding out, and keeps every sum of
// it with a clock reading or a window far from overflowing.
const MaxSafeGuard = 7 * 24 * time.Hour

// Instance reports an empty namespace or instance ID, or one that is not
// printable text ([Text]), with an error wrapping engine.ErrInvalidConfig.
func Instance(namespace, id string) error {
	switch {
	case namespace == "":
		return fmt.Errorf("%w: machine: instance %s has an empty namespace", engine.ErrInvalidConfig, Quote(id))
	case id == "":
		return fmt.Errorf("%w: machine: empty instance ID in namespace %s", engine.ErrInvalidConfig, Quote(namespace))
	}
	if err := Text("machine", "namespace", namespace); err != nil {
		return err
	}
	return Text("machine", "instance ID", id)
}

// Text refuses a name (a namespace, an instance ID, a sequence name) that
// holds a control byte (a NUL, a newline, DEL) or is not valid UTF-8: such
// a name is a mistake, a database may refuse it in a way that reads as an
// outage (PostgreSQL rejects a NUL in text), and it would reach logs and
// error messages as is. pkg and what name it in the error, which wraps
// engine.ErrInvalidConfig.
func Text(pkg, what, name string) error {
	for i := 0; i < len(name); {
		c, size := utf8.DecodeRuneInString(name[i:])
		if c == utf8.RuneError && size == 1 || c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s: %s %s holds byte %q at offset %d: names are printable UTF-8 text",
				engine.ErrInvalidConfig, pkg, what, Quote(name), name[i], i)
		}
		i += size
	}
	return nil
}

// Quote quotes s for an error message, cut to its first 64 bytes, so a
// huge name does not make a huge error.
func Quote(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:most], len(s))
}

// Distribute checks the arguments of a Distribute call: a valid instance,
// machineBits in [1, MaxMachineBits] and a safe-guard duration in
// (0, MaxSafeGuard] (zero would let anyone reclaim a live ID at once).
// Errors wrap engine.ErrInvalidConfig.
func Distribute(namespace, id string, machineBits int, safeGuard time.Duration) error {
	if err := Instance(namespace, id); err != nil {
		return err
	}
	if machineBits < 1 || machineBits > MaxMachineBits {
		return fmt.Errorf("%w: machine: machineBits %d outside [1, %d]", engine.ErrInvalidConfig, machineBits, MaxMachineBits)
	}
	if safeGuard <= 0 || safeGuard > MaxSafeGuard {
		return fmt.Errorf("%w: machine: safe-guard duration %v outside (0, %v]", engine.ErrInvalidConfig, safeGuard, MaxSafeGuard)
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
