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
