// Package segment generates strictly increasing IDs from ranges (segments)
// handed out by a shared store: the single-segment [Generator] refills
// synchronously, the lock-free [Chain] keeps segments prefetched ahead so
// callers only ever pay an atomic add.
//
// IDs are strictly increasing per Generator or Chain and, across instances
// sharing a store, unique and roughly increasing: instances interleave by at
// most the IDs each holds ahead (a few steps). Defaults ([DefaultStep] and
// the others) are explained where they are declared. Distributors for SQL
// databases and Redis live in engine/sqlstore and engine/redisstore;
// engine/segment/segmenttest checks any [Distributor] against the contract
// and provides an in-memory fake.
package segment

import "context"

// Distributor hands out ranges of one named sequence. NextMaxID atomically
// advances the sequence by step and returns the new maximum: the caller owns
// the IDs (max-step, max]. Implementations live in engine/sqlstore and
// engine/redisstore; errors from an unreachable store wrap
// engine.ErrStoreUnavailable.
type Distributor interface {
	NextMaxID(ctx context.Context, step int64) (int64, error)
}

// DistributorFunc adapts a function to [Distributor].
type DistributorFunc func(ctx context.Context, step int64) (int64, error)

// NextMaxID calls f(ctx, step).
func (f DistributorFunc) NextMaxID(ctx context.Context, step int64) (int64, error) {
	return f(ctx, step)
}
