// Package machine assigns snowflake machine IDs to running instances so users
// never number replicas by hand (seed: ShardingSphere article §3.2.3, CosId).
//
// A [Distributor] hands out a machine ID for an [Instance]: it reuses the
// instance's own ID, else reclaims one that is free or whose owner stopped
// heartbeating for longer than the safe-guard duration, else takes the next
// unused number, and past 2^machineBits fails with
// engine.ErrMachineIDOverflow. A [Lease] keeps the ID: it heartbeats the
// last timestamp while the process lives and reverts the ID on Close.
package machine

import (
	"context"
	"time"
)

// Instance identifies one running copy of a service inside a namespace.
type Instance struct {
	// Namespace groups the instances that share one machine-ID space,
	// usually the service name.
	Namespace string
	// ID is unique per running instance: host:port, a pod name, or any
	// explicit string.
	ID string
	// Stable instances (a StatefulSet pod, a fixed host) keep their machine ID
	// across restarts: Revert leaves it assigned to them.
	Stable bool
}

// State is a machine ID with the last timestamp issued under it.
type State struct {
	MachineID int64
	// LastTimestamp is the Unix time in milliseconds of the last ID (or
	// heartbeat) under this machine ID, 0 if unknown. A generator starting
	// with this machine ID waits until its clock passes it.
	LastTimestamp int64
}

// Distributor stores machine-ID assignments. Every method is atomic in the
// store: two instances racing never receive the same machine ID.
type Distributor interface {
	// Distribute returns the machine ID for inst, in [0, 2^machineBits).
	// IDs whose last heartbeat is older than safeGuard may be reclaimed.
	Distribute(ctx context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error)
	// Guard records that inst still holds st.MachineID, with st.LastTimestamp
	// as its newest timestamp. It returns an error wrapping
	// engine.ErrMachineIDLost if the ID now belongs to another instance.
	Guard(ctx context.Context, inst Instance, st State) error
	// Revert gives the machine ID back (stable instances keep it), saving
	// st.LastTimestamp for whoever takes it next.
	Revert(ctx context.Context, inst Instance, st State) error
}
