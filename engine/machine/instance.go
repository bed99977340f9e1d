package machine

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/idforge/idforge/engine"
)

// MaxMachineBits bounds the machineBits a distribution accepts: 2^31 machine
// IDs is far beyond any deployment and fits every store's integer column.
const MaxMachineBits = 31

// HostInstance returns the unstable instance "hostname:port" in namespace,
// the address that tells one running copy from another. With port 0 (a process that
// listens on no fixed port) it returns "hostname:pid" instead: unique among
// the processes running on the host, but different on every start, so a
// restart never finds its previous machine ID and a [LocalState] file is
// written per run. Set Stable on the result for a host whose hostname and
// port do not change across restarts.
func HostInstance(namespace string, port int) (Instance, error) {
	if port < 0 || port > 65535 {
		return Instance{}, fmt.Errorf("%w: machine: port %d outside [0, 65535]", engine.ErrInvalidConfig, port)
	}
	host, err := os.Hostname()
	if err != nil {
		return Instance{}, fmt.Errorf("%w: machine: reading the hostname for the instance ID: %v", engine.ErrInvalidConfig, err)
	}
	if port == 0 {
		port = os.Getpid()
	}
	inst := Instance{Namespace: namespace, ID: host + ":" + strconv.Itoa(port)}
	return inst, inst.Validate()
}

// Validate reports an empty namespace or instance ID, with an error wrapping
// engine.ErrInvalidConfig.
func (i Instance) Validate() error {
	switch {
	case i.Namespace == "":
		return fmt.Errorf("%w: machine: instance %q has an empty namespace", engine.ErrInvalidConfig, i.ID)
	case i.ID == "":
		return fmt.Errorf("%w: machine: empty instance ID in namespace %q", engine.ErrInvalidConfig, i.Namespace)
	}
	return nil
}

// String returns "namespace/id", marked "(stable)" for stable instances.
func (i Instance) String() string {
	if i.Stable {
		return i.Namespace + "/" + i.ID + " (stable)"
	}
	return i.Namespace + "/" + i.ID
}

// ValidateDistribute checks the arguments of [Distributor.Distribute]: a
// valid instance, machineBits in [1, MaxMachineBits] and a positive
// safe-guard duration (zero would let anyone reclaim a live ID at once).
// Errors wrap engine.ErrInvalidConfig. Store implementations call it first so
// every distributor rejects the same inputs.
func ValidateDistribute(inst Instance, machineBits int, safeGuard time.Duration) error {
	if err := inst.Validate(); err != nil {
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

// checkFits reports a machine ID outside [0, 2^machineBits).
func checkFits(id int64, machineBits int, source string) error {
	if id < 0 {
		return fmt.Errorf("%w: machine: %s gives negative machine ID %d", engine.ErrInvalidConfig, source, id)
	}
	if limit := int64(1) << machineBits; id >= limit {
		return fmt.Errorf("%w: machine: %s gives machine ID %d, which does not fit %d machine bits (at most %d)",
			engine.ErrMachineIDOverflow, source, id, machineBits, limit-1)
	}
	return nil
}
