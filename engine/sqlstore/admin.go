package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/holding"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
)

// OpenAdmin opens the store on db for the operator's commands, as [Open]
// does, but does not refuse a ride-through window the store records that
// differs from Settings.RideThrough: the commands hold no machine ID, and
// SetRideThrough rewrites the window. Close the Admin when done; it does
// not close the *sql.DB.
func OpenAdmin(ctx context.Context, db *sql.DB, settings ...Settings) (machine.Admin, error) {
	s, err := open(ctx, db, true, settings)
	if err != nil {
		return nil, err
	}
	return admin{s}, nil
}

// admin implements the operator's commands on a store: [machine.Admin].
type admin struct{ *Store }

var _ machine.Admin = admin{}

// adminStmts serve the operator's commands (`idforge store`), not the
// generators: they ignore the epoch, which an operator reads as it is.
type adminStmts struct {
	machines, release, counter, newestHeld *stmt
}

func newAdminStmts(s *Store) adminStmts {
	const (
		machines = `SELECT machine_id, COALESCE(instance_id, ''), stable, holder IS NOT NULL, last_timestamp, version
FROM {machine} WHERE namespace = $1 ORDER BY machine_id`
		// $1 namespace, $2 machine ID, $3 the version read: a holder that
		// moved since is not released by a decision taken on the old row.
		release = `UPDATE {machine} SET instance_id = NULL, holder = NULL, version = version + 1
WHERE namespace = $1 AND machine_id = $2 AND version = $3`
		counter    = `SELECT last_max_id FROM {seg} WHERE name = $1`
		newestHeld = `SELECT COALESCE(MAX(last_timestamp), 0) FROM {machine} WHERE holder IS NOT NULL`
	)
	return adminStmts{machines: s.stmt(machines), release: s.stmt(release), counter: s.stmt(counter), newestHeld: s.stmt(newestHeld)}
}

// Machines lists the machine IDs of namespace, in order.
func (s admin) Machines(ctx context.Context, namespace string) ([]machine.Assignment, error) {
	as, _, err := s.machines(ctx, namespace)
	return as, err
}

func (s *Store) machines(ctx context.Context, namespace string) ([]machine.Assignment, []int64, error) {
	release, err := s.admin.machines.turn(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	p, err := s.admin.machines.prepared(ctx)
	if err != nil {
		return nil, nil, s.unavailable("listing machine IDs", err)
	}
	rows, err := p.QueryContext(ctx, s.admin.machines.args([]any{namespace})...)
	if err != nil {
		return nil, nil, s.unavailable("listing machine IDs", err)
	}
	defer rows.Close()
	var as []machine.Assignment
	var versions []int64
	for rows.Next() {
		a := machine.Assignment{Instance: machine.Instance{Namespace: namespace}}
		var v int64
		if err := rows.Scan(&a.MachineID, &a.Instance.ID, &a.Instance.Stable, &a.Held, &a.LastTimestamp, &v); err != nil {
			return nil, nil, s.unavailable("listing machine IDs", err)
		}
		as, versions = append(as, a), append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, s.unavailable("listing machine IDs", err)
	}
	return as, versions, nil
}

// Release gives machineID of namespace back, keeping its last timestamp for
// the next holder to wait out. A holding heartbeated within the reset grace
// is live and refused with an error wrapping engine.ErrInstanceInUse unless
// force is set: its holder would find the ID gone at its next heartbeat and
// stop issuing under it.
func (s admin) Release(ctx context.Context, namespace string, machineID int64, force bool) error {
	as, versions, err := s.machines(ctx, namespace)
	if err != nil {
		return err
	}
	for i, a := range as {
		if a.MachineID != machineID {
			continue
		}
		if err := holding.CheckRelease(a, s.nowMillis(), holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough), force); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		res, err := s.admin.release.exec(ctx, namespace, machineID, versions[i])
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err != nil:
			return s.unavailable("releasing a machine ID", err)
		case n != 1:
			return fmt.Errorf("%s: namespace %q: machine ID %d changed while it was being released: %w; try again",
				s.name, namespace, machineID, engine.ErrInstanceInUse)
		}
		return nil
	}
	return fmt.Errorf("%s: namespace %q: machine ID %d was never handed out: %w", s.name, namespace, machineID, engine.ErrInvalidConfig)
}

// Counter returns the largest ID the sequence name handed out ranges up to
// (its counter); found is false when the store has no such sequence.
func (s admin) Counter(ctx context.Context, name string) (counter int64, found bool, err error) {
	if err := checkName("sequence", name, maxName); err != nil {
		return 0, false, err
	}
	found, err = s.admin.counter.queryRow(ctx, []any{&counter}, name)
	if err != nil {
		return 0, false, s.unavailable("reading sequence "+name, err)
	}
	if counter < 0 {
		counter = untrustedCounter(counter)
	}
	return counter, found, nil
}

// Restored declares the store restored: in one transaction it marks every
// counter untrusted and gives the store a new epoch (creating the epoch
// row if it is missing). Processes of the old epoch see a reset at their
// next operation, wait the reset grace and re-seed what they used above
// what they got; every other counter is served only above a Floor or after
// RaiseCounter.
func (s admin) Restored(ctx context.Context) error {
	fresh := storeepoch.NewToken(s.cfg.Clock.Now())
	if err := s.untrustAll(ctx, func(tx *sql.Tx) (bool, error) {
		if _, err := s.meta.create.execIn(ctx, tx, fresh); err != nil {
			return false, err
		}
		_, err := s.meta.overwrite.execIn(ctx, tx, fresh)
		return err == nil, err
	}); err != nil {
		return s.unavailable("declaring the store restored", err)
	}
	return nil
}

// RaiseCounter raises the sequence name's counter to at least to, never
// lowering it, creating the sequence there if it is missing (the operator
// vouches no ID above to was handed out), and returns the counter.
func (s admin) RaiseCounter(ctx context.Context, name string, to int64) (int64, error) {
	if err := checkName("sequence", name, maxName); err != nil {
		return 0, err
	}
	token, err := s.ready(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.raise(ctx, token, name, to); err != nil {
		return 0, s.unavailable("raising sequence "+name, err)
	}
	c, _, err := s.Counter(ctx, name)
	return c, err
}

// SetRideThrough rewrites the ride-through window the store records. A
// machine ID whose stored last timestamp is within the old window's reset
// grace of now may have a holder issuing under the old window, so that is
// refused unless force is set.
func (s admin) SetRideThrough(ctx context.Context, w time.Duration, force bool) (time.Duration, error) {
	if err := storeepoch.CheckRideThrough("the ride-through window", w); err != nil {
		return 0, err
	}
	w = storeepoch.ResolveRideThrough(w)
	rec, err := s.readRideThrough(ctx)
	if err != nil {
		return 0, err
	}
	old, _ := storeepoch.ParseRecord(rec)
	if !force {
		var newest int64
		if _, err := s.admin.newestHeld.queryRow(ctx, []any{&newest}); err != nil {
			return 0, s.unavailable("reading the machine IDs held", err)
		}
		if err := storeepoch.CheckQuiet(s.name, newest, s.nowMillis(), old); err != nil {
			return 0, err
		}
	}
	if _, err := s.meta.createRide.exec(ctx, storeepoch.FormatRecord(w)); err != nil {
		return 0, s.unavailable("recording the ride-through window", err)
	}
	if _, err := s.meta.writeRide.exec(ctx, storeepoch.FormatRecord(w)); err != nil {
		return 0, s.unavailable("recording the ride-through window", err)
	}
	return old, nil
}
