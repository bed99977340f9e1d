package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/storeepoch"
)

// segmentDistributor hands out ranges of one named sequence stored in a
// Redis string; ranges never overlap across processes sharing the key.
type segmentDistributor struct {
	s    *Store
	name string
	key  string
}

// Segment returns the distributor of the named sequence, stored at
// [Store.SegmentKey](name); it is safe for concurrent use. Any name is
// valid, the empty one included.
//
// NextMaxID advances the sequence by step in one script, one round trip, and
// returns the new max: the caller owns (max-step, max]. The script checks
// the store's epoch, and the counter against the highest max ID this Store
// ever got for the name (its floor): a counter below it means the store went
// back without changing its epoch (an old snapshot, lost acknowledged
// writes, a failover to a lagging replica), so the script raises the counter
// to the floor and replaces the epoch: every process sees a reset. A step <= 0 is an
// error wrapping engine.ErrInvalidConfig; a sequence that would pass the
// int64 range, one wrapping engine.ErrIDOverflow; a store whose epoch
// changed, one wrapping engine.ErrStoreReset (the next fetch waits out the
// reset grace); any other failure, one wrapping engine.ErrStoreUnavailable.
func (s *Store) Segment(name string) (segment.Distributor, error) {
	return &segmentDistributor{s: s, name: name, key: s.SegmentKey(name)}, nil
}

func (d *segmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	what := fmt.Sprintf("segment %q", d.name) // the chain adds the size
	if step <= 0 {
		return 0, fmt.Errorf("%w: redisstore: segment %q: step %d must be positive", engine.ErrInvalidConfig, d.name, step)
	}
	token, err := d.s.ready(ctx)
	if err != nil {
		return 0, err
	}
	if err := d.s.applyFloor(ctx, token, d.name, what); err != nil {
		return 0, err
	}
	floor, fresh := d.s.epoch.Floor(d.name), storeepoch.NewToken(d.s.cfg.Clock.Now())
	res, err := segmentScript.Eval(ctx, d.s.client, []string{d.s.EpochKey(), d.key},
		token, step, d.s.cfg.Start, floor, fresh, "1").Slice()
	if err != nil {
		var reply redis.Error
		if errors.As(err, &reply) && strings.Contains(err.Error(), "would overflow") {
			return 0, fmt.Errorf("%s: %s: %w: %w", d.s.name, what, engine.ErrIDOverflow, err)
		}
		return 0, d.s.unavailable(what, err)
	}
	switch r := reply(res); r.kind() {
	case "ok":
		maxID, err := strconv.ParseInt(r.str(1), 10, 64)
		if err != nil {
			return 0, d.s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
		}
		d.s.epoch.Raise(d.name, maxID)
		return maxID, nil
	case "reset":
		return 0, d.s.reset(ctx, token, r.str(1), what)
	case "behind":
		// The script replaced the epoch: adopt it like any reset.
		err := d.s.reset(ctx, token, fresh, what)
		return 0, fmt.Errorf("%w (the counter was at %s, below %d this store already got: the store lost acknowledged writes; its epoch was replaced)",
			err, r.str(1), floor)
	}
	return 0, d.s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
}
