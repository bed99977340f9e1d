// Package machine assigns snowflake machine IDs to running instances so users
// never number replicas by hand.
//
// A [Distributor] hands out a machine ID for an [Instance]: it reuses the
// instance's own ID, else reclaims one that is free or whose owner stopped
// heartbeating for longer than the safe-guard duration, else takes the next
// unused number, and past 2^machineBits fails with
// engine.ErrMachineIDOverflow. A [Lease] keeps the ID: it heartbeats the
// last timestamp while the process lives, fences the generator (its Check
// fails once the ID may belong to someone else) and reverts the ID on Close.
//
// Distributors in this package: [Manual] (a fixed number), [StatefulSet] (the
// Kubernetes pod ordinal), [LocalState] (a decorator remembering the last
// timestamp in a local file across restarts) and [Default] (zero
// configuration). The SQL and Redis distributors live in engine/sqlstore and
// engine/redisstore; engine/machine/machinetest checks any implementation
// against the contract below.
//
// Defaults: 10 machine bits, a five-minute safe-guard duration, and a
// heartbeat every 250 ms that reserves one second ahead (see [Settings]).
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
	// explicit string. Two processes running with one ID share its machine
	// ID and will issue duplicates.
	ID string
	// Stable instances (a StatefulSet pod, a fixed host) keep their machine ID
	// across restarts: Revert leaves it assigned to them and no other instance
	// ever reclaims it.
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
//
// A store judges expiry by "now" in Unix milliseconds read from a
// clock.Clock it is configured with (so tests can drive it with clock.Fake),
// not by the database or Redis server time. All instances of a namespace use
// the same machineBits.
type Distributor interface {
	// Distribute returns the machine ID for inst, in [0, 2^machineBits),
	// trying in this order:
	//
	//   - self: the ID inst already holds (a stable instance still holds its
	//     ID after Revert);
	//   - reclaim: an ID nobody holds (an unstable instance reverted it), or
	//     one held by an unstable instance whose stored last timestamp is
	//     <= now - safeGuard. IDs held by stable instances are never
	//     reclaimed; retiring one is an operator's job in the store;
	//   - new: a number never handed out;
	//
	// and otherwise fails with an error wrapping engine.ErrMachineIDOverflow.
	// The returned LastTimestamp is the ID's stored last timestamp before
	// this call (0 for a new number): the generator waits until its clock
	// passes it. The store then records inst (and inst.Stable) as the holder
	// and raises the stored timestamp to at least now, so the ID cannot be
	// reclaimed for safeGuard. Arguments rejected by [ValidateDistribute] give
	// an error wrapping engine.ErrInvalidConfig; a failing store, one wrapping
	// engine.ErrStoreUnavailable.
	Distribute(ctx context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error)
	// Guard records that inst still holds st.MachineID, raising the stored
	// last timestamp to st.LastTimestamp (never lowering it: a delayed,
	// older heartbeat must not make a live ID look expired). If inst does
	// not hold st.MachineID any more, because another instance reclaimed it
	// after inst was silent for safeGuard, Guard changes nothing and returns
	// an error wrapping engine.ErrMachineIDLost.
	Guard(ctx context.Context, inst Instance, st State) error
	// Revert gives the machine ID back when inst stops, storing
	// st.LastTimestamp for whoever takes the ID next. It may be below what
	// Guard stored: the caller passes at least the newest timestamp it
	// used, so a clean stop leaves no reservation to wait out (a Lease
	// passes its reservations too unless it has a TimestampSource). An
	// unstable inst releases the ID; a stable one keeps holding it. If inst
	// does not hold st.MachineID, Revert changes nothing (it must never free
	// the new holder's ID) and returns an error wrapping
	// engine.ErrMachineIDLost.
	Revert(ctx context.Context, inst Instance, st State) error
}

// ResetGracer is implemented by a [Distributor] whose store, once it finds
// it was reset (it forgot what it handed out), hands nothing out until
// ResetGrace has passed since the reset was first seen: the time live
// processes of the forgotten state have to stop. engine/sqlstore,
// engine/redisstore and proxystore implement it, and [LocalState] passes it
// through (see [ResetGraceOf]). [Acquire] refuses a lease that could go
// on issuing without its store for that long, since a process cut off from
// the store during a reset would then share its machine ID with a newcomer.
// ResetGrace <= 0 means no grace (a store no other process uses): nothing is
// checked.
type ResetGracer interface {
	ResetGrace() time.Duration
}

// ResetGraceOf returns d's reset grace, 0 when d has none. A decorator of
// a Distributor implements ResetGracer with it, passing its inner one's
// through, so wrapping a store never hides its grace from [Acquire].
func ResetGraceOf(d Distributor) time.Duration {
	if g, ok := d.(ResetGracer); ok {
		return g.ResetGrace()
	}
	return 0
}
