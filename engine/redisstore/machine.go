package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
)

// MaxMachineBits bounds the machineBits a distributor accepts: 2^31 machine
// IDs is already far beyond any deployment, and keeps the scripts' numbers
// exact.
const MaxMachineBits = 31

var (
	//go:embed scripts/machine_common.lua
	machineCommon string
	//go:embed scripts/machine_distribute.lua
	distributeSrc string
	//go:embed scripts/machine_guard.lua
	guardSrc string
	//go:embed scripts/machine_revert.lua
	revertSrc string

	distributeScript = redis.NewScript(machineCommon + distributeSrc)
	guardScript      = redis.NewScript(machineCommon + guardSrc)
	revertScript     = redis.NewScript(machineCommon + revertSrc)
)

// MachineDistributor assigns snowflake machine IDs from Redis. It implements
// machine.Distributor; each method is one atomic script, one round trip.
// The key layout and the reclaim rules are in the package documentation.
type MachineDistributor struct {
	client redis.Cmdable
	prefix string
	clock  clock.Clock
}

var _ machine.Distributor = (*MachineDistributor)(nil)

// NewMachineDistributor returns the machine-ID distributor; it is
// New(client, opts...) followed by Store.Machine().
func NewMachineDistributor(client redis.Cmdable, opts ...Option) (*MachineDistributor, error) {
	s, err := New(client, opts...)
	if err != nil {
		return nil, err
	}
	return s.Machine(), nil
}

// Distribute returns inst's machine ID in [0, 2^machineBits): its own if it
// holds one, else a free one or one silent for at least safeGuard, else the
// next unused number. When every number is held it returns an error wrapping
// engine.ErrMachineIDOverflow. State.LastTimestamp is the last timestamp
// stored for the ID before this call, 0 for a number never used.
func (d *MachineDistributor) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	keys, err := d.keys(inst)
	if err != nil {
		return machine.State{}, err
	}
	if machineBits < 1 || machineBits > MaxMachineBits {
		return machine.State{}, fmt.Errorf("%w: redisstore: machineBits %d outside [1, %d]", engine.ErrInvalidConfig, machineBits, MaxMachineBits)
	}
	if safeGuard < time.Millisecond {
		return machine.State{}, fmt.Errorf("%w: redisstore: safe-guard duration %v must be at least 1ms", engine.ErrInvalidConfig, safeGuard)
	}
	stable := "0"
	if inst.Stable {
		stable = "1"
	}
	res, err := distributeScript.Eval(ctx, d.client, keys,
		inst.ID, stable, int64(1)<<machineBits, d.now(), safeGuard.Milliseconds()).Int64Slice()
	if err != nil {
		return machine.State{}, unavailable(fmt.Sprintf("distribute machine ID in namespace %q", inst.Namespace), err)
	}
	if len(res) != 2 {
		return machine.State{}, unavailable(fmt.Sprintf("distribute machine ID in namespace %q", inst.Namespace),
			fmt.Errorf("unexpected script reply %v", res))
	}
	if res[0] < 0 {
		return machine.State{}, fmt.Errorf("%w: redisstore: namespace %q has all %d IDs of %d machine bits in use, none free or silent for %v",
			engine.ErrMachineIDOverflow, inst.Namespace, int64(1)<<machineBits, machineBits, safeGuard)
	}
	return machine.State{MachineID: res[0], LastTimestamp: res[1]}, nil
}

// Guard heartbeats st.MachineID: the stored last timestamp becomes the
// newest of itself, st.LastTimestamp and now. If inst no longer owns the ID
// (it was reclaimed after a long silence, or reverted) it returns an error
// wrapping engine.ErrMachineIDLost and changes nothing.
func (d *MachineDistributor) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	return d.own(ctx, guardScript, "guard", inst, st, d.now())
}

// Revert gives st.MachineID back, storing st.LastTimestamp (if newer) for
// the next owner. A stable instance keeps the ID for its next start. If inst
// no longer owns the ID it returns an error wrapping engine.ErrMachineIDLost
// and changes nothing.
func (d *MachineDistributor) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	return d.own(ctx, revertScript, "revert", inst, st)
}

// own runs a script that acts on st.MachineID only while inst owns it.
func (d *MachineDistributor) own(ctx context.Context, script *redis.Script, op string, inst machine.Instance, st machine.State, extra ...any) error {
	keys, err := d.keys(inst)
	if err != nil {
		return err
	}
	if st.MachineID < 0 {
		return fmt.Errorf("%w: redisstore: %s negative machine ID %d", engine.ErrInvalidConfig, op, st.MachineID)
	}
	what := fmt.Sprintf("%s machine ID %d in namespace %q", op, st.MachineID, inst.Namespace)
	args := append([]any{inst.ID, st.MachineID, st.LastTimestamp}, extra...)
	res, err := script.Eval(ctx, d.client, keys, args...).Slice()
	if err != nil {
		return unavailable(what, err)
	}
	if len(res) != 2 {
		return unavailable(what, fmt.Errorf("unexpected script reply %v", res))
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	owner, _ := res[1].(string)
	holder := "it is free"
	if owner != "" {
		holder = fmt.Sprintf("instance %q holds it", owner)
	}
	return fmt.Errorf("%w: redisstore: %s: instance %q no longer owns it, %s", engine.ErrMachineIDLost, what, inst.ID, holder)
}

// keys returns the namespace's instances hash, machines hash and reclaim
// set, which share the {namespace} hash tag.
func (d *MachineDistributor) keys(inst machine.Instance) ([]string, error) {
	switch {
	case inst.Namespace == "":
		return nil, fmt.Errorf("%w: redisstore: empty machine namespace", engine.ErrInvalidConfig)
	case strings.ContainsAny(inst.Namespace, "{}"):
		return nil, fmt.Errorf("%w: redisstore: machine namespace %q contains a brace, which would break its cluster hash tag", engine.ErrInvalidConfig, inst.Namespace)
	case inst.ID == "":
		return nil, fmt.Errorf("%w: redisstore: empty instance ID in namespace %q", engine.ErrInvalidConfig, inst.Namespace)
	}
	base := d.prefix + "machine:{" + inst.Namespace + "}:"
	return []string{base + "instances", base + "machines", base + "reclaim"}, nil
}

func (d *MachineDistributor) now() int64 { return d.clock.Now().UnixMilli() }
