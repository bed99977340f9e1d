// Package storeadmin is the contract between the stores and the operator's
// commands of `idforge store`: list machine IDs, give one back, show or
// raise a sequence's counter, declare a store restored. engine/sqlstore and engine/redisstore answer
// it through their Admin method; cmd/idforge is its only user, so it stays
// out of the public API. It imports engine/machine only.
package storeadmin

import (
	"context"
	"time"

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
	// BrandNew reports whether the store's epoch was declared brand-new
	// (`idforge store init`): no sequence of it was handed out before the
	// epoch, so a missing one may start at the store's Start.
	BrandNew() bool
	// EpochCreated returns when the store's epoch was created, by the
	// clock of the process that created it (to the millisecond).
	EpochCreated() time.Time
	// Machines lists the machine IDs of namespace, in order.
	Machines(ctx context.Context, namespace string) ([]Assignment, error)
	// Release gives machineID of namespace back, keeping its last
	// timestamp for the next holder to wait out. A live holding is refused
	// with an error wrapping engine.ErrInstanceInUse unless force is set.
	Release(ctx context.Context, namespace string, machineID int64, force bool) error
	// Counter returns the counter of the sequence name (the last ID handed
	// out; of an untrusted counter, what the store holds) and whether the
	// sequence exists.
	Counter(ctx context.Context, name string) (counter int64, found bool, err error)
	// RaiseCounter raises the counter of name to at least to (never
	// lowers it), which makes an untrusted counter trusted, and returns the
	// counter.
	RaiseCounter(ctx context.Context, name string, to int64) (int64, error)
	// Restored declares the store's state older than what was handed out
	// (restored from a backup, copied, rolled back by a failover): a new
	// epoch, so every live process sees a reset, and every counter marked
	// untrusted, so a sequence is served again only above a Floor, a
	// re-seed by a live process that used it, or a RaiseCounter. Both in
	// one transaction (SQL) or script (Redis).
	Restored(ctx context.Context) error
	// SetRideThrough rewrites the ride-through window the store records
	// and returns the one it replaced (0 when there was none). While a
	// machine ID was heartbeated within the old window plus the reset
	// grace its holder may be issuing under the old window, so that is
	// refused with an error wrapping engine.ErrInstanceInUse unless force
	// is set.
	SetRideThrough(ctx context.Context, w time.Duration, force bool) (old time.Duration, err error)
}

type rewriting struct{}

// Rewriting marks ctx for an Open that is to rewrite the recorded
// ride-through window: the store does not refuse a window that differs.
func Rewriting(ctx context.Context) context.Context {
	return context.WithValue(ctx, rewriting{}, true)
}

// IsRewriting reports whether ctx was marked by [Rewriting].
func IsRewriting(ctx context.Context) bool { return ctx.Value(rewriting{}) != nil }
