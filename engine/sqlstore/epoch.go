package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/schema"
)

type metaStmts struct {
	read, create, replace, raise, rows *stmt
	// untrust marks every trusted counter untrusted (see [untrustedCounter]);
	// overwrite sets the epoch whatever it was.
	untrust, overwrite *stmt
	// The ride-through record: read, create unless present, overwrite.
	readRide, createRide, writeRide *stmt
}

func newMetaStmts(s *Store) metaStmts {
	const (
		read   = `SELECT value FROM {meta} WHERE name = 'epoch'`
		create = `INTO {meta} (name, value) VALUES ('epoch', $1)`
		// $1 new epoch, $2 the epoch it replaces.
		replace = `UPDATE {meta} SET value = $1 WHERE name = 'epoch' AND value = $2`
		// $1 floor, $2 name, $3 epoch. An untrusted counter's value counts
		// as a lower bound, and the raise makes it trusted.
		raise = `UPDATE {seg} SET last_max_id = {greatest}(CASE WHEN last_max_id < 0 THEN -(last_max_id + 1) ELSE last_max_id END, $1)
WHERE name = $2 AND {epoch $3}`
		untrust   = `UPDATE {seg} SET last_max_id = -last_max_id - 1 WHERE last_max_id >= 0`
		overwrite = `UPDATE {meta} SET value = $1 WHERE name = 'epoch'`
		rows      = `SELECT (SELECT COUNT(*) FROM {seg}) + (SELECT COUNT(*) FROM {machine})`

		readRide   = `SELECT value FROM {meta} WHERE name = '` + storeepoch.RecordName + `'`
		createRide = `INTO {meta} (name, value) VALUES ('` + storeepoch.RecordName + `', $1)`
		writeRide  = `UPDATE {meta} SET value = $1 WHERE name = '` + storeepoch.RecordName + `'`
	)
	ms := metaStmts{read: s.stmt(read), replace: s.stmt(replace), raise: s.stmt(greatest(s.cfg.Dialect, raise)), rows: s.stmt(rows),
		untrust: s.stmt(untrust), overwrite: s.stmt(overwrite),
		readRide: s.stmt(readRide), writeRide: s.stmt(writeRide)}
	if s.cfg.Dialect == schema.MySQL {
		ms.create = s.stmt("INSERT IGNORE " + create)
		ms.createRide = s.stmt("INSERT IGNORE " + createRide)
	} else {
		ms.create = s.stmt("INSERT " + create + " ON CONFLICT (name) DO NOTHING")
		ms.createRide = s.stmt("INSERT " + createRide + " ON CONFLICT (name) DO NOTHING")
	}
	return ms
}

// readEpoch returns the stored epoch token, "" when there is none.
func (s *Store) readEpoch(ctx context.Context) (string, error) {
	var token string
	if _, err := s.meta.read.queryRow(ctx, []any{&token}); err != nil {
		return "", s.unavailable("reading the epoch", err)
	}
	return token, nil
}

// openEpoch returns the store's epoch, creating it when there is none:
// brand-new with [Settings.Init] on empty tables.
func (s *Store) openEpoch(ctx context.Context) (string, error) {
	if !s.cfg.Init {
		return s.createEpoch(ctx, false)
	}
	token, err := s.readEpoch(ctx)
	if err != nil || token != "" {
		return token, err
	}
	var n int64
	if _, err := s.meta.rows.queryRow(ctx, []any{&n}); err != nil {
		return "", s.unavailable("counting the rows of a store without an epoch", err)
	}
	if n > 0 {
		return "", fmt.Errorf("%w: %s: Settings.Init: the store has no epoch but holds %d rows: it is not brand-new (it may have been wiped in part)",
			engine.ErrInvalidConfig, s.name, n)
	}
	return s.createEpoch(ctx, true)
}

// createEpoch makes the store's epoch exist and returns it; a new one is
// brand-new if so asked. A store found without an epoch that is not
// declared brand-new may have lost it alone (idforge_meta emptied, a
// backup restored without it): its counters may be older than what was
// handed out, so the new epoch comes with every counter marked untrusted,
// in one transaction.
func (s *Store) createEpoch(ctx context.Context, brandNew bool) (string, error) {
	if brandNew {
		if _, err := s.meta.create.exec(ctx, storeepoch.NewBrandNewToken(s.cfg.Clock.Now())); err != nil {
			return "", s.unavailable("creating the epoch", err)
		}
	} else {
		token, err := s.readEpoch(ctx)
		if err != nil || token != "" {
			return token, err
		}
		fresh := storeepoch.NewToken(s.cfg.Clock.Now())
		if err := s.untrustAll(ctx, func(tx *sql.Tx) (bool, error) {
			// Created by a racer meanwhile: it marked the counters.
			return affected1(s.meta.create.execIn(ctx, tx, fresh))
		}); err != nil {
			return "", s.unavailable("creating the epoch", err)
		}
	}
	token, err := s.readEpoch(ctx)
	if err == nil && token == "" {
		err = s.unavailable("creating the epoch", fmt.Errorf("the epoch row vanished"))
	}
	return token, err
}

// ready waits until the current epoch may hand things out, re-seeds the
// segment floors after an adoption, and returns the epoch token.
func (s *Store) ready(ctx context.Context) (string, error) {
	token, err := s.epoch.Ready(ctx, s.raise)
	if err != nil {
		return "", s.unavailable("after a store reset", err)
	}
	return token, nil
}

// raise lifts the segment name to at least floor under the epoch token,
// creating its row if needed; it does nothing when the epoch is no longer
// token (the caller's own operation will see that, adopt the newest epoch
// and re-seed under it).
func (s *Store) raise(ctx context.Context, token, name string, floor int64) error {
	if _, err := s.seg.create.exec(ctx, name, s.cfg.Start, s.nowMillis(), token); err != nil {
		return err
	}
	_, err := s.meta.raise.exec(ctx, floor, name, token)
	return err
}

// checkEpoch is called when a statement guarded by the epoch token touched
// no row: if the stored epoch is not token it returns the reset error (after
// adopting the stored epoch), else nil and the caller looks for another
// cause.
func (s *Store) checkEpoch(ctx context.Context, token, what string) error {
	current, err := s.readEpoch(ctx)
	if err != nil {
		return err
	}
	if current == token {
		return nil
	}
	return s.reset(ctx, token, current, what)
}

// reset adopts the epoch now stored (creating one when there is none) and
// returns an error wrapping engine.ErrStoreReset.
func (s *Store) reset(ctx context.Context, seen, current, what string) error {
	return s.epoch.Reset(ctx, s.name, what, seen, current, func() (string, error) { return s.createEpoch(ctx, false) }, s.raise)
}

// greatest renders {greatest}: the two-argument maximum of the dialect.
func greatest(d schema.Dialect, src string) string {
	if d == schema.SQLite {
		return replaceAll(src, "{greatest}", "MAX") // SQLite's scalar max
	}
	return replaceAll(src, "{greatest}", "GREATEST")
}

// wentBack handles a counter found below the floor under an unchanged
// epoch: the store lost commits (restored from a backup, failed over to a
// replica behind), so any counter may be older than what was handed out.
// It declares the store restored, unless another process replaced the
// epoch first: a new epoch and every counter untrusted, in one
// transaction. Every process sees a reset; this one adopts the new epoch,
// re-seeds what it used above what it got (this one's included) and
// returns the reset error.
func (s *Store) wentBack(ctx context.Context, token, what string, counter, floor int64) error {
	return fmt.Errorf("%w (the counter was at %d, below %d this store already got: the store lost committed writes; its epoch was replaced and every counter marked untrusted)",
		s.goneBack(ctx, token, what), counter, floor)
}

// goneBack declares restored a store caught going back under the epoch
// token, unless another process replaced the epoch first, adopts the
// epoch now stored and returns the reset error (see wentBack).
func (s *Store) goneBack(ctx context.Context, token, what string) error {
	fresh := storeepoch.NewToken(s.cfg.Clock.Now())
	if err := s.untrustAll(ctx, func(tx *sql.Tx) (bool, error) {
		return affected1(s.meta.replace.execIn(ctx, tx, fresh, token))
	}); err != nil {
		return s.unavailable(what+": replacing the epoch of a store that went back", err)
	}
	current, err := s.readEpoch(ctx)
	if err != nil {
		return err
	}
	return s.reset(ctx, token, current, what)
}

// untrustAll marks every trusted counter untrusted, then runs set, which
// writes the epoch and reports whether to commit, in one transaction:
// no process sees the new epoch without the marks.
func (s *Store) untrustAll(ctx context.Context, set func(tx *sql.Tx) (bool, error)) error {
	return s.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		if _, err := s.meta.untrust.execIn(ctx, tx); err != nil {
			return false, err
		}
		return set(tx)
	})
}

// affected1 reports whether a statement changed exactly one row.
func affected1(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// readRideThrough returns the ride-through window the store records, "" when
// there is none.
func (s *Store) readRideThrough(ctx context.Context) (string, error) {
	var rec string
	if _, err := s.meta.readRide.queryRow(ctx, []any{&rec}); err != nil {
		return "", s.unavailable("reading the ride-through window", err)
	}
	return rec, nil
}

// openRideThrough records [Settings.RideThrough] when the store records no
// window, and refuses a different recorded one (unless [OpenAdmin] opened
// the store).
func (s *Store) openRideThrough(ctx context.Context) error {
	if _, err := s.meta.createRide.exec(ctx, storeepoch.FormatRecord(s.cfg.RideThrough)); err != nil {
		return s.unavailable("recording the ride-through window", err)
	}
	rec, err := s.readRideThrough(ctx)
	if err != nil || s.rewriting {
		return err
	}
	return storeepoch.CheckRecord(s.name, rec, s.cfg.RideThrough)
}
