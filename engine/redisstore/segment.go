package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

//go:embed scripts/segment.lua
var segmentSrc string

var segmentScript = redis.NewScript(segmentSrc)

// SegmentDistributor hands out ranges of one named sequence stored in a
// Redis string. It implements segment.Distributor and is safe for concurrent
// use; ranges never overlap across processes sharing the key.
type SegmentDistributor struct {
	client redis.Cmdable
	key    string
	start  int64
}

var _ segment.Distributor = (*SegmentDistributor)(nil)

// NewSegmentDistributor returns the distributor of the named sequence; it is
// New(client, opts...) followed by Store.Segment(name).
func NewSegmentDistributor(client redis.Cmdable, name string, opts ...Option) (*SegmentDistributor, error) {
	s, err := New(client, opts...)
	if err != nil {
		return nil, err
	}
	return s.Segment(name), nil
}

// Key returns the Redis key holding the sequence's last max ID.
func (d *SegmentDistributor) Key() string { return d.key }

// NextMaxID advances the sequence by step in one round trip and returns the
// new max: the caller owns (max-step, max]. A step <= 0 is an error wrapping
// engine.ErrInvalidConfig; a sequence that would pass the int64 range, one
// wrapping engine.ErrIDOverflow; any other failure, one wrapping
// engine.ErrStoreUnavailable that names the key.
func (d *SegmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	if step <= 0 {
		return 0, fmt.Errorf("%w: redisstore: segment %s: step %d must be positive", engine.ErrInvalidConfig, d.key, step)
	}
	var (
		maxID int64
		err   error
	)
	if d.start == 0 {
		maxID, err = d.client.IncrBy(ctx, d.key, step).Result()
	} else {
		maxID, err = segmentScript.Eval(ctx, d.client, []string{d.key}, step, d.start).Int64()
	}
	if err != nil {
		var reply redis.Error
		if errors.As(err, &reply) && strings.Contains(err.Error(), "would overflow") {
			return 0, fmt.Errorf("%w: redisstore: segment %s advanced by %d: %w", engine.ErrIDOverflow, d.key, step, err)
		}
		return 0, unavailable("INCRBY "+d.key, err)
	}
	return maxID, nil
}
