package sqlstore

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/schema"
)

// maxName is the length of the name and namespace columns, in bytes (the
// DDL counts characters on PostgreSQL, which is never less).
const maxName = 128

func replaceAll(s, old, new string) string { return strings.ReplaceAll(s, old, new) }

type segmentStmts struct {
	advance, create, read *stmt
}

func newSegmentStmts(s *Store) segmentStmts {
	// $1 step, $2 now, $3 name, $4 the largest value that can still grow by
	// step (the row is left alone rather than overflowing int64), $5 the
	// floor (a counter below it went back: the row is left alone), $6 the
	// epoch.
	const (
		returning = `UPDATE {seg} SET last_max_id = last_max_id + $1, step = $1, last_fetch_time = $2
WHERE name = $3 AND last_max_id <= $4 AND last_max_id >= $5 AND {epoch $6} RETURNING last_max_id`
		// LAST_INSERT_ID(expr) puts the new maximum into the statement's
		// result (the OK packet's insert ID): no second query.
		lastInsertID = `UPDATE {seg} SET last_max_id = LAST_INSERT_ID(last_max_id + $1), step = $1, last_fetch_time = $2
WHERE name = $3 AND last_max_id <= $4 AND last_max_id >= $5 AND {epoch $6}`
		read = `SELECT last_max_id FROM {seg} WHERE name = $1`
		// $1 name, $2 start, $3 now, $4 epoch.
		insertMySQL = `INSERT IGNORE INTO {seg} (name, last_max_id, step, created_at, last_fetch_time)
SELECT $1, $2, 0, $3, $3 FROM {meta} WHERE name = 'epoch' AND value = $4`
		insert = `INSERT INTO {seg} (name, last_max_id, step, created_at, last_fetch_time)
SELECT CAST($1 AS VARCHAR(128)), CAST($2 AS BIGINT), 0, CAST($3 AS BIGINT), CAST($3 AS BIGINT)
FROM {meta} WHERE name = 'epoch' AND value = $4 ON CONFLICT (name) DO NOTHING`
	)
	if s.cfg.Dialect == schema.MySQL {
		return segmentStmts{advance: s.stmt(lastInsertID), create: s.stmt(insertMySQL), read: s.stmt(read)}
	}
	return segmentStmts{advance: s.stmt(returning), create: s.stmt(insert), read: s.stmt(read)}
}

// segmentDistributor hands out ranges of one named sequence in the segment
// table.
type segmentDistributor struct {
	s     *Store
	name  string
	floor engine.Floor
	mark  storeepoch.FloorMark
}

// Segment returns the distributor of the sequence name, safe for
// concurrent use. A name must be 1 to 128 bytes of printable UTF-8 (no
// control bytes); another is refused with engine.ErrInvalidConfig. floors, with
// [Settings.Floor], say where the sequence's data ends (the largest of
// their answers counts): before the distributor's first fetch, and its
// first after every store reset, the counter is raised to that (created if
// missing). A sequence missing from the table with no Floor that knows it
// starts at [Settings.Start] on a brand-new store ([Settings.Init]) and is
// refused with an error wrapping engine.ErrNoFloor on any other. So is a
// sequence whose counter is untrusted, which may be older than what was
// handed out: every counter is, after `idforge store restored`, after Open
// found the store without an epoch but with counters (idforge_meta emptied
// or not restored), and after a fetch found the store went back. A Floor's
// answer, a re-seed by a process that used the sequence before, or
// `idforge store chain NAME -raise N` makes it trusted again at the larger
// of its value and theirs.
//
// Its NextMaxID advances the sequence by step and returns the new maximum:
// the caller owns the IDs (max-step, max]. It is one statement in the
// common case (the first fetch of a new sequence also inserts its row),
// which checks the store's epoch, and the counter against the highest
// maximum this Store ever got for the name (its floor): a counter below it
// means the store went back without changing its epoch (restored from a
// backup, failed over to a replica that had not received the last commits),
// so the Store declares the store restored (a new epoch, every counter
// untrusted), every process sees a reset and re-seeds what it used above
// what it got. Database failures wrap
// engine.ErrStoreUnavailable; a step that would carry the sequence past the
// largest int64 wraps engine.ErrIDOverflow; a store whose epoch changed,
// engine.ErrStoreReset (the next fetch waits out the reset grace).
func (s *Store) Segment(name string, floors ...engine.Floor) (segment.Distributor, error) {
	if err := checkName("segment name", name, maxName); err != nil {
		return nil, err
	}
	return &segmentDistributor{s: s, name: name, floor: storeepoch.Floors(append(floors, s.cfg.Floor)...)}, nil
}

// Confirmed returns when the newest store operation that found the store
// under this Store's epoch was sent (see segment.Settings.Fence).
func (d *segmentDistributor) Confirmed() time.Time { return d.s.epoch.Confirmed() }

func (d *segmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	if step <= 0 {
		return 0, fmt.Errorf("%w: sqlstore: segment %q: step %d, want > 0", engine.ErrInvalidConfig, d.name, step)
	}
	what := fmt.Sprintf("segment %q", d.name) // the chain adds the size
	token, err := d.s.ready(ctx)
	if err != nil {
		return 0, err
	}
	if err := d.s.epoch.ApplyFloor(ctx, token, d.name, d.floor, d.s.cfg.Start, d.s.raise, &d.mark); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", d.s.name, what, err)
	}
	floor := d.s.epoch.Floor(d.name)
	for attempt := 0; ; attempt++ {
		sent := d.s.cfg.Clock.Now()
		maxID, ok, err := d.advance(ctx, step, floor, token)
		if err != nil {
			return 0, d.s.unavailable(what, err)
		}
		if ok {
			d.s.epoch.Raise(d.name, maxID)
			d.s.epoch.Confirm(sent)
			return maxID, nil
		}
		// No row matched: another epoch, a missing row, a counter below
		// the floor, or one that would overflow.
		if err := d.s.checkEpoch(ctx, token, what); err != nil {
			return 0, err
		}
		var counter int64
		found, err := d.s.seg.read.queryRow(ctx, []any{&counter}, d.name)
		switch {
		case err != nil:
			return 0, d.s.unavailable(what, err)
		case found && counter < 0:
			return 0, storeepoch.UntrustedError(d.s.name, d.name, untrustedCounter(counter), d.mark.Why())
		case !found && floor > 0, found && counter < floor:
			return 0, d.s.wentBack(ctx, token, what, counter, floor)
		case found && counter > math.MaxInt64-step:
			return 0, fmt.Errorf("%s: %s: %w: the sequence cannot grow past the largest int64", d.s.name, what, engine.ErrIDOverflow)
		case found && attempt > 0:
			return 0, d.s.unavailable(what, fmt.Errorf("the row matched no fetch (counter %d, floor %d)", counter, floor))
		case !found && !storeepoch.BrandNew(token):
			return 0, storeepoch.NoFloorError(d.s.name, d.name, d.mark.Why())
		case !found:
			if _, err := d.s.seg.create.exec(ctx, d.name, d.s.cfg.Start, d.s.nowMillis(), token); err != nil {
				return 0, d.s.unavailable(fmt.Sprintf("segment %q: creating it", d.name), err)
			}
		}
	}
}

// untrustedCounter is the value of a counter stored untrusted: a trusted
// counter c is stored as c, an untrusted one as -c-1 (so 0 stays
// negative). The fetch's "counter >= floor" (a floor is never negative)
// leaves an untrusted counter alone, and a raise makes it trusted again
// at the larger of its value and the raise.
func untrustedCounter(stored int64) int64 { return -(stored + 1) }

// advance runs the one-statement fetch; ok is false when no row matched.
func (d *segmentDistributor) advance(ctx context.Context, step, floor int64, token string) (maxID int64, ok bool, err error) {
	st := d.s.seg.advance
	args := []any{step, d.s.nowMillis(), d.name, math.MaxInt64 - step, floor, token}
	if d.s.cfg.Dialect != schema.MySQL {
		ok, err = st.queryRow(ctx, []any{&maxID}, args...)
		return maxID, ok, err
	}
	res, err := st.exec(ctx, args...)
	if err != nil {
		return 0, false, err
	}
	// The update always changes last_max_id, so rows affected is 1 exactly
	// when the name exists, whatever the connection's clientFoundRows.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err
	}
	maxID, err = res.LastInsertId()
	return maxID, err == nil, err
}

// checkName rejects empty and over-long names before they reach the
// database (where MySQL might silently truncate them), and names that are
// not printable UTF-8 (PostgreSQL refuses a NUL in text with an error that
// would read as an outage).
func checkName(what, name string, limit int) error {
	if name == "" || len(name) > limit {
		return fmt.Errorf("%w: sqlstore: %s %s must be 1 to %d bytes", engine.ErrInvalidConfig, what, distcheck.Quote(name), limit)
	}
	return distcheck.Text("sqlstore", what, name)
}
