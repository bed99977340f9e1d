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
	if err := machine.ValidateDistribute(inst, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	if safeGuard < time.Millisecond {
		// The scripts count in milliseconds: less would be zero, letting
		// anyone reclaim a live ID at once.
		return machine.State{}, fmt.Errorf("%w: redisstore: safe-guard duration %v is under 1ms", engine.ErrInvalidConfig, safeGuard)
	}
	keys, err := d.keys(inst)
	if err != nil {
		return machine.State{}, err
	}
	what := fmt.Sprintf("distribute machine ID in namespace %q", inst.Namespace)
	res, err := distributeScript.Eval(ctx, d.client, keys,
		inst.ID, flag(inst.Stable), int64(1)<<machineBits, d.now(), safeGuard.Milliseconds()).Int64Slice()
	if err != nil {
		return machine.State{}, unavailable(what, err)
	}
	if len(res) != 2 {
		return machine.State{}, unavailable(what, fmt.Errorf("unexpected script reply %v", res))
	}
	if res[0] < 0 {
		return machine.State{}, fmt.Errorf("%w: redisstore: namespace %q has all %d IDs of %d machine bits in use, none free or silent for %v",
			engine.ErrMachineIDOverflow, inst.Namespace, int64(1)<<machineBits, machineBits, safeGuard)
	}
	return machine.State{MachineID: res[0], LastTimestamp: res[1]}, nil
}

// Guard records that inst still holds st.MachineID, raising the stored last
// timestamp to st.LastTimestamp (never lowering it); a machine.Lease passes
// the heartbeat time, which keeps the ID from expiring. If inst no longer
// holds the ID (it was reclaimed after a long silence, or reverted) Guard
// changes nothing and returns an error wrapping engine.ErrMachineIDLost that
// names the new holder.
func (d *MachineDistributor) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	return d.own(ctx, guardScript, "guard", inst, st)
}

// Revert gives st.MachineID back, raising the stored last timestamp to
// st.LastTimestamp for the next holder. A stable instance keeps holding the
// ID for its next start. If inst no longer holds the ID Revert changes
// nothing and returns an error wrapping engine.ErrMachineIDLost.
func (d *MachineDistributor) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	return d.own(ctx, revertScript, "revert", inst, st, flag(inst.Stable))
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
	if err := inst.Validate(); err != nil {
		return nil, err
	}
	if strings.ContainsAny(inst.Namespace, "{}") {
		return nil, fmt.Errorf("%w: redisstore: machine namespace %q contains a brace, which would break its cluster hash tag",
			engine.ErrInvalidConfig, inst.Namespace)
	}
	base := d.prefix + "machine:{" + inst.Namespace + "}:"
	return []string{base + "instances", base + "machines", base + "reclaim"}, nil
}

func (d *MachineDistributor) now() int64 { return d.clock.Now().UnixMilli() }

// flag is the scripts' form of a stable flag.
func flag(stable bool) string {
	if stable {
		return "1"
	}
	return "0"
}
