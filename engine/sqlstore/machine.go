package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/schema"
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
	// the limit ($6). $1 namespace, $2 instance, $3 stable, $4 now. The old
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
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + `)
RETURNING machine_id, prev_timestamp`
		// PostgreSQL: FOR UPDATE locks the candidate, re-checking it on the
		// newest version and moving on to the next if a racer changed it;
		// SKIP LOCKED passes over rows racers are claiming right now (and
		// rows being heartbeated or released at that instant). A miss
		// therefore means no row was claimable, not a lost race.
		claimPostgres = claimSet + `
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + ` FOR UPDATE SKIP LOCKED)
RETURNING machine_id, prev_timestamp`
		// InnoDB locks each row it examines, waiting for racers, and
		// evaluates WHERE on the newest version, so a miss means no row was
		// claimable; LAST_INSERT_ID carries the claimed number back.
		claimMySQL = claimSet + `, machine_id = LAST_INSERT_ID(machine_id)
WHERE ` + candidates + ` ` + order
		prevTimestamp = `SELECT prev_timestamp FROM {machine} WHERE namespace = $1 AND machine_id = $2`
		next          = `SELECT COALESCE(MAX(machine_id) + 1, 0) FROM {machine} WHERE namespace = $1`
		columns       = `INTO {machine} (namespace, machine_id, instance_id, stable, last_timestamp, prev_timestamp, distribute_time, revert_time, version)`
		// $1 namespace, $2 instance, $3 stable, $4 now, $5 limit. The
		// primary key turns away a number a racer inserted first.
		insertReturning = `INSERT ` + columns + `
SELECT $1, next_id, CAST($2 AS VARCHAR(255)), CAST($3 AS BOOLEAN), CAST($4 AS BIGINT), 0, CAST($4 AS BIGINT), 0, 0
FROM (SELECT COALESCE(MAX(machine_id) + 1, 0) AS next_id FROM {machine} WHERE namespace = $1) AS n
WHERE next_id < $5
ON CONFLICT DO NOTHING
RETURNING machine_id`
		// $1 namespace, $2 machine ID, $3 instance, $4 stable, $5 now.
		insertMySQL = `INSERT IGNORE ` + columns + ` VALUES ($1, $2, $3, $4, $5, 0, $5, 0, 0)`
		// $1 last timestamp, $2 namespace, $3 machine ID, $4 instance.
		guard = `UPDATE {machine} SET last_timestamp = {greatest}(last_timestamp, $1), version = version + 1
WHERE namespace = $2 AND machine_id = $3 AND instance_id = $4`
		// $1 keep (stable), $2 last timestamp, $3 now, $4 namespace,
		// $5 machine ID, $6 instance.
		revert = `UPDATE {machine} SET instance_id = CASE WHEN $1 THEN instance_id END,
last_timestamp = {greatest}(last_timestamp, $2), revert_time = $3, version = version + 1
WHERE namespace = $4 AND machine_id = $5 AND instance_id = $6`
	)
	greatest := "GREATEST"
	if s.cfg.dialect == schema.SQLite {
		greatest = "MAX" // SQLite's scalar max
	}
	stmt := func(src string) *stmt { return s.stmt(strings.ReplaceAll(src, "{greatest}", greatest)) }
	ms := machineStmts{next: stmt(next), guard: stmt(guard), revert: stmt(revert)}
	switch s.cfg.dialect {
	case schema.MySQL:
		ms.claim, ms.prevTimestamp, ms.insert = stmt(claimMySQL), stmt(prevTimestamp), stmt(insertMySQL)
	case schema.Postgres:
		ms.claim, ms.insert = stmt(claimPostgres), stmt(insertReturning)
	default:
		ms.claim, ms.insert = stmt(claimSQLite), stmt(insertReturning)
	}
	return ms
}

// MachineDistributor keeps machine-ID assignments in the machine table; it
// implements machine.Distributor and is safe for concurrent use. "Now" for
// expiry decisions and the times it records comes from the store's clock
// ([WithClock]).
//
// Round trips for Distribute, uncontended: the instance's own row or a
// reclaimed one costs one statement on PostgreSQL and SQLite and two on
// MySQL/MariaDB (which has no UPDATE … RETURNING: the claim's insert ID
// carries the machine ID, a second query its last timestamp); a new number
// costs two on PostgreSQL and SQLite (the claim finds nothing, an INSERT …
// SELECT takes max+1) and three on MySQL/MariaDB (claim, read max+1,
// insert). Guard and Revert are one statement each.
type MachineDistributor struct {
	store *Store
	owned bool // made by NewMachineDistributor: Close closes the store
}

var _ machine.Distributor = (*MachineDistributor)(nil)

// Machine returns the store's machine-ID distributor.
func (s *Store) Machine() *MachineDistributor { return &MachineDistributor{store: s} }

// NewMachineDistributor returns a machine-ID distributor on db with a store
// of its own that does no I/O until used: the dialect comes from
// [WithDialect] or the driver's type. Close releases its prepared statements.
func NewMachineDistributor(db *sql.DB, opts ...Option) (*MachineDistributor, error) {
	s, err := openWithoutContext(db, opts)
	if err != nil {
		return nil, err
	}
	return &MachineDistributor{store: s, owned: true}, nil
}

// Close releases the prepared statements of a distributor made by
// [NewMachineDistributor]; for one made by [Store.Machine] it does nothing
// (close the Store).
func (m *MachineDistributor) Close() error {
	if m.owned {
		return m.store.Close()
	}
	return nil
}

// Distribute returns inst's machine ID: its own row if it has one, else
// the lowest row that is free or whose unstable owner's last timestamp is
// at least safeGuard old, else the next unused number. When all
// 2^machineBits are taken it returns an error wrapping
// engine.ErrMachineIDOverflow. The State's LastTimestamp is the row's last
// timestamp before this call (0 for a new number), for the generator to
// wait out; the stored one rises to now. Two instances racing never get the
// same machine ID.
func (m *MachineDistributor) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := machine.ValidateDistribute(inst, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	if err := checkInstance(inst); err != nil {
		return machine.State{}, err
	}
	limit := int64(1) << machineBits
	// Whole milliseconds, rounded up: a sub-millisecond safe guard must not
	// make every row expired.
	guardMillis := int64((safeGuard + time.Millisecond - 1) / time.Millisecond)
	for range maxAttempts {
		now := m.store.nowMillis()
		st, ok, err := m.claim(ctx, inst, now, now-guardMillis, limit)
		if err != nil {
			return machine.State{}, m.unavailable(inst, "claiming a machine ID", err)
		}
		if ok && st.MachineID >= limit {
			// Our own row from a layout with more machine bits: give it back
			// and look again within the new limit.
			if err := m.revert(ctx, inst, false, st); err != nil {
				return machine.State{}, err
			}
			continue
		}
		if ok {
			return st, nil
		}
		st, ok, full, err := m.insertNext(ctx, inst, now, limit)
		switch {
		case err != nil:
			return machine.State{}, m.unavailable(inst, "taking a new machine ID", err)
		case ok:
			return st, nil
		case full:
			return machine.State{}, fmt.Errorf("%w: sqlstore: namespace %q: all %d machine IDs of %d bits are taken (instance %q)",
				engine.ErrMachineIDOverflow, inst.Namespace, limit, machineBits, inst.ID)
		}
		// A racer took the row or the number first: look again.
	}
	return machine.State{}, m.unavailable(inst, "distributing", fmt.Errorf("gave up after %d attempts lost to racing instances", maxAttempts))
}

// claim takes inst's own row or a reclaimable one in one conditional
// UPDATE; ok is false when there is none (or a racer changed it first).
func (m *MachineDistributor) claim(ctx context.Context, inst machine.Instance, now, cutoff, limit int64) (st machine.State, ok bool, err error) {
	ms := m.store.mach
	args := []any{inst.Namespace, inst.ID, inst.Stable, now, cutoff, limit}
	if m.store.cfg.dialect != schema.MySQL {
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
// the same number (or this instance's row) first.
func (m *MachineDistributor) insertNext(ctx context.Context, inst machine.Instance, now, limit int64) (st machine.State, ok, full bool, err error) {
	ms := m.store.mach
	var next int64
	if m.store.cfg.dialect != schema.MySQL {
		ok, err = ms.insert.queryRow(ctx, []any{&st.MachineID}, inst.Namespace, inst.ID, inst.Stable, now, limit)
		if err != nil || ok {
			return st, ok, false, err
		}
		if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
			return st, false, false, err
		}
		return st, false, next >= limit, nil
	}
	// MySQL: an INSERT … SELECT would take shared next-key locks on the
	// scanned rows and deadlock against a racing one; read max+1 with a
	// plain consistent read and let the primary key decide instead.
	if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
		return st, false, false, err
	}
	if next >= limit {
		return st, false, true, nil
	}
	res, err := ms.insert.exec(ctx, inst.Namespace, next, inst.ID, inst.Stable, now)
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
// engine.ErrMachineIDLost.
func (m *MachineDistributor) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	res, err := m.store.mach.guard.exec(ctx, st.LastTimestamp, inst.Namespace, st.MachineID, inst.ID)
	return m.owned1(inst, st, "heartbeat", res, err)
}

// Revert gives inst's machine ID back, saving st.LastTimestamp for the next
// owner: an unstable instance frees the row, a stable one keeps it. If the
// row no longer belongs to inst it returns an error wrapping
// engine.ErrMachineIDLost.
func (m *MachineDistributor) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	return m.revert(ctx, inst, inst.Stable, st)
}

func (m *MachineDistributor) revert(ctx context.Context, inst machine.Instance, keep bool, st machine.State) error {
	res, err := m.store.mach.revert.exec(ctx, keep, st.LastTimestamp, m.store.nowMillis(), inst.Namespace, st.MachineID, inst.ID)
	return m.owned1(inst, st, "revert", res, err)
}

// owned1 turns the result of an UPDATE guarded by the owner into an error:
// a database failure, or no row (the machine ID was lost). Every such
// UPDATE bumps version, so one matched row is one affected row on MySQL too.
func (m *MachineDistributor) owned1(inst machine.Instance, st machine.State, what string, res sql.Result, err error) error {
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return m.unavailable(inst, fmt.Sprintf("%s of machine ID %d", what, st.MachineID), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: sqlstore: %s: namespace %q machine ID %d no longer belongs to instance %q",
			engine.ErrMachineIDLost, what, inst.Namespace, st.MachineID, inst.ID)
	}
	return nil
}

func (m *MachineDistributor) unavailable(inst machine.Instance, what string, err error) error {
	return m.store.unavailable(fmt.Sprintf("namespace %q instance %q: %s", inst.Namespace, inst.ID, what), err)
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
