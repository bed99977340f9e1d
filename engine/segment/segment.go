package segment

import (
	"context"
	"time"
)

// Distributor hands out ranges of one named sequence. NextMaxID atomically
// advances the sequence by step and returns the new maximum: the caller owns
// the IDs (max-step, max]. Implementations live in engine/sqlstore and
// engine/redisstore; errors from an unreachable store wrap
// engine.ErrStoreUnavailable.
type Distributor interface {
	NextMaxID(ctx context.Context, step int64) (int64, error)
	// Confirmed returns when the newest operation sent to the store that
	// found it had not forgotten what it handed out was sent, operations of
	// the same store value for other sequences and a machine-ID lease's
	// heartbeats included: a chain's Fence withholds what it holds once
	// that is too long ago. The zero time means the store confirms nothing
	// apart from NextMaxID's own answers, which the chain counts itself.
	Confirmed() time.Time
}
