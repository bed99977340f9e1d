package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
)

const (
	// maxInstance is the length of the instance_id column, in bytes.
	maxInstance = 255
	// maxAttempts bounds Distribute's retries. Each retry means a racing
	// instance won a row, so it only runs out under a storm of
	// distributions or when the database misbehaves.
	maxAttempts = 1000
)

type machineStmts struct {
	claim, prevTimestamp, next, insert, guard, revert *stmt
}

func newMachineStmts(s *Store) machineStmts {
	// A row may be claimed by another instance when it is free, or when its
	// owner is not stable and its last timestamp is no later than the
	// cutoff ($5, now - safeGuard).
	const reclaimable = `(instance_id IS NULL OR (NOT stable AND last_timestamp <= $5))`
	// Claim the instance's own row, else the lowest reclaimable one below
	// the limit ($6), while the epoch is $7. $1 namespace, $2 instance,
	// $3 stable, $4 now. The old
	// last timestamp goes to prev_timestamp for the caller to wait out, and
	// last_timestamp rises to now, so a racer re-checking the row no longer
	// finds it expired. (MySQL assigns left to right: prev_timestamp first.)
	const (
		claimSet = `UPDATE {machine} SET instance_id = $2, stable = $3, prev_timestamp = last_timestamp,
last_timestamp = {greatest}(last_timestamp, $4), distribute_time = $4, version = version + 1`
		candidates = `namespace = $1 AND (instance_id = $2 OR (machine_id < $6 AND ` + reclaimable + `))`
		order      = `ORDER BY CASE WHEN instance_id = $2 THEN 0 ELSE 1 END, machine_id LIMIT 1`
		// SQLite runs writers one at a time, so the candidate is still one
		// when the UPDATE changes it.
		claimSQLite = claimSet + `
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + `) AND {epoch $7}
RETURNING machine_id, prev_timestamp`
		// PostgreSQL: FOR UPDATE locks the candidate, re-checking it on the
		// newest version and moving on to the next if a racer changed it;
		// SKIP LOCKED passes over rows racers are claiming right now (and
		// rows being heartbeated or released at that instant). A miss
		// therefore means no row was claimable, not a lost race.
		claimPostgres = claimSet + `
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + ` FOR UPDATE SKIP LOCKED)
AND {epoch $7}
RETURNING machine_id, prev_timestamp`
		// InnoDB locks each row it examines, waiting for racers, and
		// evaluates WHERE on the newest version, so a miss means no row was
		// claimable; LAST_INSERT_ID carries the claimed number back.
		claimMySQL = claimSet + `, machine_id = LAST_INSERT_ID(machine_id)
WHERE ` + candidates + ` AND {epoch $7} ` + order
		prevTimestamp = `SELECT prev_timestamp FROM {machine} WHERE namespace = $1 AND machine_id = $2`
		next          = `SELECT COALESCE(MAX(machine_id) + 1, 0) FROM {machine} WHERE namespace = $1`
		columns       = `INTO {machine} (namespace, machine_id, instance_id, stable, last_timestamp, prev_timestamp, distribute_time, revert_time, version)`
		// $1 namespace, $2 instance, $3 stable, $4 now, $5 limit, $6 epoch.
		// The primary key turns away a number a racer inserted first.
		insertReturning = `INSERT ` + columns + `
SELECT $1, next_id, CAST($2 AS VARCHAR(255)), CAST($3 AS BOOLEAN), CAST($4 AS BIGINT), 0, CAST($4 AS BIGINT), 0, 0
FROM (SELECT COALESCE(MAX(machine_id) + 1, 0) AS next_id FROM {machine} WHERE namespace = $1) AS n
WHERE next_id < $5 AND {epoch $6}
ON CONFLICT DO NOTHING
RETURNING machine_id`
		// $1 namespace, $2 machine ID, $3 instance, $4 stable, $5 now,
		// $6 epoch.
		insertMySQL = `INSERT IGNORE ` + columns + `
SELECT $1, $2, $3, $4, $5, 0, $5, 0, 0 FROM {meta} WHERE name = 'epoch' AND value = $6`
		// $1 last timestamp, $2 namespace, $3 machine ID, $4 instance,
		// $5 epoch.
		guard = `UPDATE {machine} SET last_timestamp = {greatest}(last_timestamp, $1), version = version + 1
WHERE namespace = $2 AND machine_id = $3 AND instance_id = $4 AND {epoch $5}`
		// $1 keep (stable), $2 last timestamp, $3 now, $4 namespace,
		// $5 machine ID, $6 instance, $7 epoch.
		// Revert stores $2 as it is, even below what Guard raised: the
		// owner's last word covers every ID it issued, and a clean close
		// need not leave its reservation for the next holder to wait out.
		revert = `UPDATE {machine} SET instance_id = CASE WHEN $1 THEN instance_id END,
last_timestamp = $2, revert_time = $3, version = version + 1
WHERE namespace = $4 AND machine_id = $5 AND instance_id = $6 AND {epoch $7}`
	)
	stmt := func(src string) *stmt { return s.stmt(greatest(s.cfg.Dialect, src)) }
	ms := machineStmts{next: stmt(next), guard: stmt(guard), revert: stmt(revert)}
	switch s.cfg.Dialect {
	case MySQL:
		ms.claim, ms.prevTimestamp, ms.insert = stmt(claimMySQL), stmt(prevTimestamp), stmt(insertMySQL)
	case Postgres:
		ms.claim, ms.insert = stmt(claimPostgres), stmt(insertReturning)
	default:
		ms.claim, ms.insert = stmt(claimSQLite), stmt(insertReturning)
	}
	return ms
}

var (
	_ machine.Distributor = (*Store)(nil)
	_ machine.ResetGracer = (*Store)(nil)
)

// ResetGrace returns [Settings.ResetGrace] as resolved: what
// machine.Acquire checks a lease's settings against.
func (s *Store) ResetGrace() time.Duration { return s.epoch.Grace() }

// Distribute returns inst's machine ID: its own row if it has one, else
// the lowest row that is free or whose unstable owner's last timestamp is
// at least safeGuard old, else the next unused number. When all
// 2^machineBits are taken it returns an error wrapping
// engine.ErrMachineIDOverflow. The State's LastTimestamp is the row's last
// timestamp before this call (0 for a new number), for the generator to
// wait out; the stored one rises to now. Two instances racing never get the
// same machine ID. Every statement checks the store's epoch: a store that
// forgot its state gives an error wrapping engine.ErrStoreReset, and the
// next Distribute waits out the reset grace.
//
// Round trips, uncontended: the instance's own row or a reclaimed one costs
// one statement on PostgreSQL and SQLite and two on MySQL/MariaDB (which has
// no UPDATE … RETURNING: the claim's insert ID carries the machine ID, a
// second query its last timestamp); a new number costs two on PostgreSQL
// and SQLite (the claim finds nothing, an INSERT … SELECT takes max+1) and
// three on MySQL/MariaDB (claim, read max+1, insert).
func (s *Store) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := machine.ValidateDistribute(inst, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	if err := checkInstance(inst); err != nil {
		return machine.State{}, err
	}
	what := fmt.Sprintf("namespace %q instance %q: distributing a machine ID", inst.Namespace, inst.ID)
	token, err := s.ready(ctx)
	if err != nil {
		return machine.State{}, err
	}
	limit := int64(1) << machineBits
	// Whole milliseconds, rounded up: a sub-millisecond safe guard must not
	// make every row expired.
	guardMillis := int64((safeGuard + time.Millisecond - 1) / time.Millisecond)
	for range maxAttempts {
		now := s.nowMillis()
		st, ok, err := s.claim(ctx, inst, now, now-guardMillis, limit, token)
		if err != nil {
			return machine.State{}, s.unavailable(what, err)
		}
		if ok && st.MachineID >= limit {
			// Our own row from a layout with more machine bits: give it back
			// and look again within the new limit.
			if err := s.revert(ctx, inst, false, st, token); err != nil {
				return machine.State{}, err
			}
			continue
		}
		if ok {
			return st, nil
		}
		st, ok, full, err := s.insertNext(ctx, inst, now, limit, token)
		switch {
		case err != nil:
			return machine.State{}, s.unavailable(what, err)
		case ok:
			return st, nil
		}
		// Neither a row nor a new number: the epoch may have changed.
		if err := s.checkEpoch(ctx, token, what); err != nil {
			return machine.State{}, err
		}
		if full {
			return machine.State{}, fmt.Errorf("%s: %s: %w: all %d machine IDs of %d bits are taken",
				s.name, what, engine.ErrMachineIDOverflow, limit, machineBits)
		}
		// A racer took the row or the number first: look again.
	}
	return machine.State{}, s.unavailable(what, fmt.Errorf("gave up after %d attempts lost to racing instances", maxAttempts))
}

// claim takes inst's own row or a reclaimable one in one conditional
// UPDATE; ok is false when there is none (or a racer changed it first, or
// the epoch is not token).
func (s *Store) claim(ctx context.Context, inst machine.Instance, now, cutoff, limit int64, token string) (st machine.State, ok bool, err error) {
	ms := s.mach
	args := []any{inst.Namespace, inst.ID, inst.Stable, now, cutoff, limit, token}
	if s.cfg.Dialect != MySQL {
		ok, err = ms.claim.queryRow(ctx, []any{&st.MachineID, &st.LastTimestamp}, args...)
		return st, ok, err
	}
	res, err := ms.claim.exec(ctx, args...)
	if err != nil {
		return st, false, err
	}
	// version always changes, so a matched row counts as affected.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return st, false, err
	}
	if st.MachineID, err = res.LastInsertId(); err != nil {
		return st, false, err
	}
	// The row is ours now: no racer changes prev_timestamp any more.
	ok, err = ms.prevTimestamp.queryRow(ctx, []any{&st.LastTimestamp}, inst.Namespace, st.MachineID)
	if err == nil && !ok {
		err = fmt.Errorf("claimed machine ID %d vanished", st.MachineID)
	}
	return st, err == nil, err
}

// insertNext inserts the row max+1 for inst. ok reports success; full
// reports that max+1 is past the limit; neither means a racer inserted
// the same number (or this instance's row) first, or the epoch is not token.
func (s *Store) insertNext(ctx context.Context, inst machine.Instance, now, limit int64, token string) (st machine.State, ok, full bool, err error) {
	ms := s.mach
	var next int64
	if s.cfg.Dialect != MySQL {
		ok, err = ms.insert.queryRow(ctx, []any{&st.MachineID}, inst.Namespace, inst.ID, inst.Stable, now, limit, token)
		if err != nil || ok {
			return st, ok, false, err
		}
		if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
			return st, false, false, err
		}
		return st, false, next >= limit, nil
	}
	// MySQL: an INSERT … SELECT from the machine table would take shared
	// next-key locks on the scanned rows and deadlock against a racing one;
	// read max+1 with a plain consistent read and let the primary key
	// decide instead.
	if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
		return st, false, false, err
	}
	if next >= limit {
		return st, false, true, nil
	}
	res, err := ms.insert.exec(ctx, inst.Namespace, next, inst.ID, inst.Stable, now, token)
	if err != nil {
		return st, false, false, err
	}
	n, err := res.RowsAffected()
	return machine.State{MachineID: next}, err == nil && n == 1, false, err
}

// Guard records st.LastTimestamp as the newest timestamp under inst's
// machine ID (the stored value never moves back). If the row no longer
// belongs to inst, because another instance reclaimed it after this one
// stalled past the safe-guard duration, it returns an error wrapping
// engine.ErrMachineIDLost; if the store forgot its state (its epoch
// changed), one wrapping engine.ErrStoreReset. Guard does not wait out a
// reset grace.
func (s *Store) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	token, sent := s.epoch.Token(), s.cfg.Clock.Now()
	res, err := s.mach.guard.exec(ctx, st.LastTimestamp, inst.Namespace, st.MachineID, inst.ID, token)
	if err := s.owned1(ctx, inst, st, "heartbeat", token, res, err); err != nil {
		return err
	}
	s.epoch.Confirm(sent)
	return nil
}

// Revert gives inst's machine ID back, saving st.LastTimestamp for the next
// owner (even below what Guard stored: see [machine.Distributor]): an
// unstable instance frees the row, a stable one keeps it. If the
// row no longer belongs to inst it returns an error wrapping
// engine.ErrMachineIDLost (or engine.ErrStoreReset when the store's epoch
// changed).
func (s *Store) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	return s.revert(ctx, inst, inst.Stable, st, s.epoch.Token())
}

func (s *Store) revert(ctx context.Context, inst machine.Instance, keep bool, st machine.State, token string) error {
	res, err := s.mach.revert.exec(ctx, keep, st.LastTimestamp, s.nowMillis(), inst.Namespace, st.MachineID, inst.ID, token)
	return s.owned1(ctx, inst, st, "revert", token, res, err)
}

// owned1 turns the result of an UPDATE guarded by the owner and the epoch
// into an error: a database failure, a changed epoch, or no row (the machine
// ID was lost). Every such UPDATE bumps version, so one matched row is one
// affected row on MySQL too.
func (s *Store) owned1(ctx context.Context, inst machine.Instance, st machine.State, op, token string, res sql.Result, err error) error {
	what := fmt.Sprintf("namespace %q instance %q: %s of machine ID %d", inst.Namespace, inst.ID, op, st.MachineID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return s.unavailable(what, err)
	}
	if n == 1 {
		return nil
	}
	if err := s.checkEpoch(ctx, token, what); err != nil {
		return err
	}
	return fmt.Errorf("%s: %s: %w: the instance no longer holds it", s.name, what, engine.ErrMachineIDLost)
}

// checkInstance adds the columns' length limits to inst.Validate.
func checkInstance(inst machine.Instance) error {
	if err := inst.Validate(); err != nil {
		return err
	}
	if err := checkName("namespace", inst.Namespace, maxName); err != nil {
		return err
	}
	return checkName("instance ID", inst.ID, maxInstance)
}
