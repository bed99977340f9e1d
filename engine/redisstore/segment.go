package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/segment"
)

// segmentDistributor hands out ranges of one named sequence stored in a
// Redis string; ranges never overlap across processes sharing the key.
type segmentDistributor struct {
	s     *Store
	name  string
	key   string
	floor engine.Floor
	mark  storeepoch.FloorMark
}

// Segment returns the distributor of the named sequence, stored at
// the segment key(name); it is safe for concurrent use. Any printable
// UTF-8 name is valid, the empty one included; a name with a control byte
// (a NUL, a newline) is refused with engine.ErrInvalidConfig. floors, with [Settings.Floor], say where
// the sequence's data ends (the largest of their answers counts): before
// the distributor's first fetch, and its first after every store reset, the
// counter is raised to that (created if missing). A sequence missing from
// the store with no Floor that knows it starts at [Settings.Start] on a
// brand-new store ([Settings.Init]) and is refused with an error wrapping
// engine.ErrNoFloor on any other. So is a sequence whose counter is
// untrusted, which may be older than what was handed out: every counter
// is, after `idforge store restored`, after a store value found the store
// without an epoch but with counters (the epoch key deleted, a snapshot
// restored without it), and after a fetch found the store went back. A
// Floor's answer, a re-seed by a process that used the sequence before, or
// `idforge store chain NAME -raise N` makes it trusted again at the larger
// of its value and theirs.
//
// NextMaxID advances the sequence by step in one script, one round trip, and
// returns the new max: the caller owns (max-step, max]. The script checks
// the store's epoch, and the counter against the highest max ID this Store
// ever got for the name (its floor): a counter below it means the store went
// back without changing its epoch (an old snapshot, lost acknowledged
// writes, a failover to a lagging replica), so the script raises the counter
// to the floor, replaces the epoch and marks every counter untrusted: every
// process sees a reset and re-seeds what it used. A step <= 0 is an
// error wrapping engine.ErrInvalidConfig; a sequence that would pass the
// int64 range, one wrapping engine.ErrIDOverflow; a store whose epoch
// changed, one wrapping engine.ErrStoreReset (the next fetch waits out the
// reset grace); any other failure, one wrapping engine.ErrStoreUnavailable.
func (s *Store) Segment(name string, floors ...engine.Floor) (segment.Distributor, error) {
	if err := distcheck.Text("redisstore", "segment name", name); err != nil {
		return nil, err
	}
	return &segmentDistributor{s: s, name: name, key: s.segmentKey(name), floor: storeepoch.Floors(append(floors, s.cfg.Floor)...)}, nil
}

// Confirmed returns when the newest store operation that found the store
// under this Store's epoch was sent (see segment.Settings.Fence).
func (d *segmentDistributor) Confirmed() time.Time { return d.s.epoch.Confirmed() }

func (d *segmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	what := fmt.Sprintf("segment %q", d.name) // the chain adds the size
	if step <= 0 {
		return 0, fmt.Errorf("%w: redisstore: segment %q: step %d must be positive", engine.ErrInvalidConfig, d.name, step)
	}
	token, err := d.s.ready(ctx)
	if err != nil {
		return 0, err
	}
	if err := d.s.epoch.ApplyFloor(ctx, token, d.name, d.floor, d.s.cfg.Start, d.s.raise, &d.mark); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", d.s.name, what, err)
	}
	floor, fresh := d.s.epoch.Floor(d.name), storeepoch.NewToken(d.s.cfg.Clock.Now())
	sent := d.s.cfg.Clock.Now()
	res, err := segmentScript.Eval(ctx, d.s.client, d.s.segmentKeys(d.name),
		token, step, d.s.cfg.Start, floor, fresh, "1", flag(storeepoch.BrandNew(token)), d.name).Slice()
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
		d.s.epoch.Confirm(sent)
		return maxID, nil
	case "nofloor":
		return 0, storeepoch.NoFloorError(d.s.name, d.name, d.mark.Why())
	case "untrusted":
		counter, err := strconv.ParseInt(r.str(1), 10, 64)
		if err != nil {
			return 0, d.s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
		}
		return 0, storeepoch.UntrustedError(d.s.name, d.name, counter, d.mark.Why())
	case "reset":
		return 0, d.s.reset(ctx, token, r.str(1), what)
	case "behind":
		// The script replaced the epoch: adopt it like any reset.
		err := d.s.reset(ctx, token, fresh, what)
		return 0, fmt.Errorf("%w (the counter was at %s, below %d this store already got: the store lost acknowledged writes; its epoch was replaced and every counter marked untrusted)",
			err, r.str(1), floor)
	}
	return 0, d.s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
}
