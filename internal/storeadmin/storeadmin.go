// Package storeadmin is the contract between the stores and the operator's
// commands of `idforge store`: list machine IDs, give one back, show or
// raise a sequence's counter. engine/sqlstore and engine/redisstore answer
// it through their Admin method; cmd/idforge is its only user, so it stays
// out of the public API. It imports engine/machine only.
package storeadmin

import (
	"context"

	"github.com/idforge/idforge/engine/machine"
)

// Assignment is one machine ID of a namespace as the store holds it.
type Assignment struct {
	MachineID int64
	// Instance is the instance the ID is assigned to, its ID empty when
	// the ID is free.
	Instance machine.Instance
	// Held is true while a holder has the ID (it did not give it back).
	Held bool
	// LastTimestamp is the newest Unix millisecond timestamp stored for it.
	LastTimestamp int64
}

// Ops are the operator's commands a store answers.
type Ops interface {
	// Machines lists the machine IDs of namespace, in order.
	Machines(ctx context.Context, namespace string) ([]Assignment, error)
	// Release gives machineID of namespace back, keeping its last
	// timestamp for the next holder to wait out. A live holding is refused
	// with an error wrapping engine.ErrInstanceInUse unless force is set.
	Release(ctx context.Context, namespace string, machineID int64, force bool) error
	// Counter returns the counter of the sequence name (the last ID handed
	// out) and whether the sequence exists.
	Counter(ctx context.Context, name string) (counter int64, found bool, err error)
	// RaiseCounter raises the counter of name to at least to (never
	// lowers it) and returns the counter.
	RaiseCounter(ctx context.Context, name string, to int64) (int64, error)
}
