package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/schema"
)

// maxName is the length of the name and namespace columns, in bytes (the
// DDL counts characters on PostgreSQL, which is never less).
const maxName = 128

type segmentStmts struct {
	advance, create *stmt
}

func newSegmentStmts(s *Store) segmentStmts {
	// $1 step, $2 now, $3 name, $4 the largest last_max_id that can still
	// grow by step: the row is left alone rather than overflowing int64.
	const (
		returning = `UPDATE {seg} SET last_max_id = last_max_id + $1, step = $1, last_fetch_time = $2
WHERE name = $3 AND last_max_id <= $4 RETURNING last_max_id`
		// LAST_INSERT_ID(expr) puts the new maximum into the statement's
		// result (the OK packet's insert ID): no second query.
		lastInsertID = `UPDATE {seg} SET last_max_id = LAST_INSERT_ID(last_max_id + $1), step = $1, last_fetch_time = $2
WHERE name = $3 AND last_max_id <= $4`
		// $1 name, $2 start, $3 now.
		insert = `INTO {seg} (name, last_max_id, step, created_at, last_fetch_time) VALUES ($1, $2, 0, $3, $3)`
	)
	if s.cfg.dialect == schema.MySQL {
		return segmentStmts{advance: s.stmt(lastInsertID), create: s.stmt("INSERT IGNORE " + insert)}
	}
	return segmentStmts{advance: s.stmt(returning), create: s.stmt("INSERT " + insert + " ON CONFLICT (name) DO NOTHING")}
}

// SegmentDistributor hands out ranges of one named sequence in the segment
// table; it implements segment.Distributor and is safe for concurrent use.
// A sequence missing from the table is created on first use, starting at
// the store's [WithStart].
type SegmentDistributor struct {
	store *Store
	name  string
	owned bool // made by NewSegmentDistributor: Close closes the store
}

var _ segment.Distributor = (*SegmentDistributor)(nil)

// Segment returns the distributor of the sequence name.
func (s *Store) Segment(name string) (*SegmentDistributor, error) {
	if err := checkName("segment name", name, maxName); err != nil {
		return nil, err
	}
	return &SegmentDistributor{store: s, name: name}, nil
}

// NewSegmentDistributor returns the distributor of the sequence name on db,
// with a store of its own that does no I/O until the first fetch: the
// dialect comes from [WithDialect] or the driver's type. Close releases its
// prepared statements. Several sequences should share one [Store] instead.
func NewSegmentDistributor(db *sql.DB, name string, opts ...Option) (*SegmentDistributor, error) {
	s, err := openWithoutContext(db, opts)
	if err != nil {
		return nil, err
	}
	d, err := s.Segment(name)
	if err != nil {
		return nil, err
	}
	d.owned = true
	return d, nil
}

// NextMaxID advances the sequence by step and returns the new maximum: the
// caller owns the IDs (max-step, max]. It is one statement in the common
// case; the first fetch of a new sequence also inserts its row. Database
// failures wrap engine.ErrStoreUnavailable; a step that would carry the
// sequence past the largest int64 wraps engine.ErrIDOverflow.
func (d *SegmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	if step <= 0 {
		return 0, fmt.Errorf("%w: sqlstore: segment %q: step %d, want > 0", engine.ErrInvalidConfig, d.name, step)
	}
	for created := false; ; created = true {
		maxID, ok, err := d.advance(ctx, step)
		if err != nil {
			return 0, d.store.unavailable(fmt.Sprintf("segment %q: fetching %d IDs", d.name, step), err)
		}
		if ok {
			return maxID, nil
		}
		if created {
			// The row exists (we or a racing process inserted it) yet the
			// update refused: it would overflow.
			return 0, fmt.Errorf("%w: sqlstore: segment %q cannot grow by %d past the largest int64", engine.ErrIDOverflow, d.name, step)
		}
		if _, err := d.store.seg.create.exec(ctx, d.name, d.store.cfg.start, d.store.nowMillis()); err != nil {
			return 0, d.store.unavailable(fmt.Sprintf("segment %q: creating it", d.name), err)
		}
	}
}

// advance runs the one-statement fetch; ok is false when no row matched.
func (d *SegmentDistributor) advance(ctx context.Context, step int64) (maxID int64, ok bool, err error) {
	st := d.store.seg.advance
	args := []any{step, d.store.nowMillis(), d.name, math.MaxInt64 - step}
	if d.store.cfg.dialect != schema.MySQL {
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

// Close releases the prepared statements of a distributor made by
// [NewSegmentDistributor]; for one made by [Store.Segment] it does nothing
// (close the Store).
func (d *SegmentDistributor) Close() error {
	if d.owned {
		return d.store.Close()
	}
	return nil
}

// checkName rejects empty and over-long names before they reach the
// database (where MySQL might silently truncate them).
func checkName(what, name string, limit int) error {
	if name == "" || len(name) > limit {
		return fmt.Errorf("%w: sqlstore: %s %q must be 1 to %d bytes", engine.ErrInvalidConfig, what, name, limit)
	}
	return nil
}
