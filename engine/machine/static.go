package machine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
)

// machineIDEnv is the environment variable [Default] reads a fixed machine
// ID from.
const machineIDEnv = "IDFORGE_MACHINE_ID"

// manual hands out one fixed machine ID. It keeps no store, so it cannot
// lose the ID; what keeps two processes from sharing it is the lock file
// idforge.New takes beside its state file (on one host), and the operator
// (across hosts).
type manual struct {
	id     int64
	source string // where the ID came from, for error messages
	err    error  // a configuration that could not be read
}

// Manual returns a distributor that always hands out machineID. Within one process one lease at
// a time may hold it. Through idforge.New (with a state directory, see
// idforge.Settings.StateDir) it also takes a lock file on the host, so a
// second process on this host with the same machine ID and namespace is
// refused at New with an error wrapping engine.ErrInstanceInUse; across
// hosts nothing can tell, and uniqueness is the operator's job. Distribute
// fails with an error wrapping
// engine.ErrInvalidConfig for a negative machineID and
// engine.ErrMachineIDOverflow when it does not fit machineBits. Guard and
// Revert succeed for machineID and report engine.ErrMachineIDLost for any
// other. Suitable only where the operator numbers the instances; prefer a
// shared store.
func Manual(machineID int64) Distributor {
	return manual{id: machineID, source: "Manual(" + strconv.FormatInt(machineID, 10) + ")"}
}

func (m manual) Distribute(_ context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error) {
	if m.err != nil {
		return State{}, m.err
	}
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
		return State{}, err
	}
	if err := distcheck.Fits(m.id, machineBits, m.source); err != nil {
		return State{}, err
	}
	return State{MachineID: m.id}, nil
}

func (m manual) Guard(_ context.Context, inst Instance, st State) error {
	return holdsFixed(m.id, m.err, m.source, inst, st)
}

func (m manual) Revert(_ context.Context, inst Instance, st State) error {
	return holdsFixed(m.id, m.err, m.source, inst, st)
}

// holdsFixed is Guard and Revert of the distributors whose ID is fixed by
// configuration: nothing to store, only a foreign ID to refuse.
func holdsFixed(id int64, cfgErr error, source string, inst Instance, st State) error {
	if cfgErr != nil {
		return cfgErr
	}
	if err := distcheck.Instance(inst.Namespace, inst.ID); err != nil {
		return err
	}
	if st.MachineID != id {
		return fmt.Errorf("%w: machine: %s holds machine ID %d, not %d", engine.ErrMachineIDLost, source, id, st.MachineID)
	}
	return nil
}

type statefulSet struct{ env string }

// StatefulSet returns a distributor that hands out the ordinal of a
// Kubernetes StatefulSet pod, read from the end of its HOSTNAME
// ("orders-3" → 3). Kubernetes
// keeps ordinals unique and gives a restarted pod its old one, so every
// instance is in effect stable: Guard and Revert succeed for the ordinal and
// store nothing. A hostname without an ordinal is an error wrapping
// engine.ErrInvalidConfig at Distribute; an ordinal that does not fit
// machineBits, one wrapping engine.ErrMachineIDOverflow.
func StatefulSet() Distributor { return statefulSet{env: "HOSTNAME"} }

// ordinal reads the pod ordinal and describes where it came from.
func (s statefulSet) ordinal() (int64, string, error) {
	host := os.Getenv(s.env)
	source := fmt.Sprintf("StatefulSet %s=%q", s.env, host)
	id, err := podOrdinal(host)
	if err != nil {
		return 0, source, fmt.Errorf("%w: machine: %s: %v", engine.ErrInvalidConfig, source, err)
	}
	return id, source, nil
}

func (s statefulSet) Distribute(_ context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error) {
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
		return State{}, err
	}
	id, source, err := s.ordinal()
	if err != nil {
		return State{}, err
	}
	if err := distcheck.Fits(id, machineBits, source); err != nil {
		return State{}, err
	}
	return State{MachineID: id}, nil
}

func (s statefulSet) Guard(_ context.Context, inst Instance, st State) error {
	id, source, err := s.ordinal()
	return holdsFixed(id, err, source, inst, st)
}

// Terms are a fixed distributor's: no window, no grace, and no last
// timestamp kept, so a process restarted on its ID needs a local state file
// to know what its predecessor issued.
func (manual) Terms() Terms { return Terms{} }

// ServerTime is the zero time: a fixed ID has no store with a clock.
func (manual) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

// Terms are the pod ordinal's: no window, no grace, no last timestamp kept.
func (statefulSet) Terms() Terms { return Terms{} }

// ServerTime is the zero time: the pod ordinal has no store with a clock.
func (statefulSet) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

func (s statefulSet) Revert(_ context.Context, inst Instance, st State) error {
	id, source, err := s.ordinal()
	return holdsFixed(id, err, source, inst, st)
}

// podOrdinal returns the ordinal Kubernetes puts at the end of a StatefulSet
// pod's name: the decimal number after the last '-' ("orders-3" → 3). It
// rejects names without one and numbers with leading zeros ("web-01"), which
// Kubernetes never generates, so "web-01" and "web-1" cannot both become 1.
func podOrdinal(hostname string) (int64, error) {
	i := strings.LastIndexByte(hostname, '-')
	if hostname == "" || i < 0 {
		return 0, fmt.Errorf("hostname %q has no StatefulSet ordinal (name-N)", hostname)
	}
	digits := hostname[i+1:]
	if digits == "" || strings.Trim(digits, "0123456789") != "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, fmt.Errorf("hostname %q does not end in a StatefulSet ordinal (name-N, N a number without leading zeros)", hostname)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("hostname %q: ordinal %s out of range", hostname, digits)
	}
	return n, nil
}

var fallbackOnce sync.Once

// Default returns the distributor for zero-configuration use, the first
// that applies of:
//
//  1. [Manual] with the number in IDFORGE_MACHINE_ID (a value that is not an
//     integer makes Distribute fail with engine.ErrInvalidConfig);
//  2. [StatefulSet], when running in Kubernetes (KUBERNETES_SERVICE_HOST is
//     set) and HOSTNAME ends in an ordinal. Outside Kubernetes hostnames
//     such as "eu-web-1" and "us-web-1" would share an ordinal, so they are
//     not trusted;
//  3. no machine ID configured: through idforge.New, the lowest machine ID
//     that no other process on this host holds, found by the lock files
//     beside the state files (see idforge.Settings.StateDir). New logs
//     which one it took (one warning). Processes on one host never share
//     one, so many test binaries or `go run`s at once are safe.
//
// The last case is ONLY SAFE ON A SINGLE HOST: processes on two hosts both
// take machine ID 0 and issue the same IDs. Without a state directory
// (StateDir "off"), or used outside idforge.New, it is machine ID 0 for
// every process, with a warning (once per process) that this is safe only
// for a single instance. Anything that runs on more than one host should
// use a shared store (engine/sqlstore, engine/redisstore) or set
// IDFORGE_MACHINE_ID per instance. Cases 1 and 2 are locked on the host
// too, as for [Manual].
func Default() Distributor {
	if v := strings.TrimSpace(os.Getenv(machineIDEnv)); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return manual{err: fmt.Errorf("%w: machine: %s=%q is not an integer machine ID", engine.ErrInvalidConfig, machineIDEnv, v)}
		}
		return manual{id: id, source: machineIDEnv + "=" + v}
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		if _, err := podOrdinal(os.Getenv("HOSTNAME")); err == nil {
			return StatefulSet()
		}
	}
	return unconfigured{}
}

// unconfiguredWhy says why Default found no machine ID.
const unconfiguredWhy = "no machine ID configured (" + machineIDEnv + " unset, not a StatefulSet pod)"

// unconfigured is Default's last case: any machine ID will do that no other
// process on this host holds. A local state decorator (internal/leased)
// picks the lowest such ID by its lock files and never calls Distribute;
// on its own Distribute hands out 0.
type unconfigured struct{}

// Unconfigured says why no machine ID was configured: the decorator that
// locks machine IDs on the host may pick any free one.
func (unconfigured) Unconfigured() string { return unconfiguredWhy }

// Terms are a fixed distributor's: no window, no grace, no last timestamp
// kept.
func (unconfigured) Terms() Terms { return Terms{} }

// ServerTime is the zero time: there is no store with a clock.
func (unconfigured) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

func (unconfigured) Distribute(ctx context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error) {
	fallbackOnce.Do(func() {
		slog.Warn("idforge: " + unconfiguredWhy + " and none locked on this host (no state directory): " +
			"using machine ID 0, which is safe only while a single instance issues IDs; " +
			"set " + machineIDEnv + " per instance or use a shared store")
	})
	return Manual(0).Distribute(ctx, inst, machineBits, safeGuard)
}

// Guard accepts any machine ID: the decorator may have picked one other
// than 0.
func (unconfigured) Guard(_ context.Context, inst Instance, st State) error {
	return anyID(inst, st)
}

// Revert accepts any machine ID, as Guard.
func (unconfigured) Revert(_ context.Context, inst Instance, st State) error {
	return anyID(inst, st)
}

func anyID(inst Instance, st State) error {
	if err := distcheck.Instance(inst.Namespace, inst.ID); err != nil {
		return err
	}
	if st.MachineID < 0 {
		return fmt.Errorf("%w: machine: negative machine ID %d", engine.ErrMachineIDLost, st.MachineID)
	}
	return nil
}
