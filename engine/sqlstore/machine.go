package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/holding"
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
	claim, claimed, next, insert, guard, revert, holderOf, serverTime *stmt
}

func newMachineStmts(s *Store) machineStmts {
	// A row may be claimed by another instance when it is free, or when its
	// owner is not stable and its last timestamp is no later than the
	// cutoff ($5, now - safeGuard).
	const reclaimable = `(instance_id IS NULL OR (NOT stable AND last_timestamp <= $5))`
	// The instance's own row is held live by another process when a holder
	// stored a last timestamp after $8: the safe-guard cutoff for a stable
	// instance, the largest BIGINT (never) for an unstable one.
	const live = `(instance_id = $2 AND holder IS NOT NULL AND last_timestamp > $8)`
	// Claim the instance's own row, else the reclaimable row below the
	// limit ($6) with the earliest of its last timestamp and now, then the
	// lowest number, among those stamped no later than $9 (now: a row
	// stamped ahead is left for when no new number is left, and then $9 is
	// the largest BIGINT); while the epoch is $7. $1 namespace, $2
	// instance, $3 stable, $4 now, $10 the new holder. The old last
	// timestamp goes to prev_timestamp for the caller to wait out, and
	// last_timestamp rises to now, so a racer re-checking the row no longer
	// finds it expired. An own row held live is matched but kept as it is
	// ({keep}): the caller sees another holder and refuses. Dialects differ
	// in what {keep} reads: MySQL assigns left to right, each assignment
	// seeing the ones before (so holder goes first, and prev_timestamp
	// before last_timestamp); PostgreSQL and SQLite read the old row.
	const (
		claimSet = `UPDATE {machine} SET holder = CASE WHEN ` + live + ` THEN holder ELSE $10 END, instance_id = $2,
stable = CASE WHEN {keep} THEN stable ELSE $3 END,
prev_timestamp = CASE WHEN {keep} THEN prev_timestamp ELSE last_timestamp END,
last_timestamp = CASE WHEN {keep} THEN last_timestamp ELSE {greatest}(last_timestamp, $4) END,
distribute_time = CASE WHEN {keep} THEN distribute_time ELSE $4 END, version = version + 1`
		candidates = `namespace = $1 AND (instance_id = $2 OR (machine_id < $6 AND ` + reclaimable + ` AND last_timestamp <= $9))`
		order      = `ORDER BY CASE WHEN instance_id = $2 THEN 0 ELSE 1 END, {greatest}(last_timestamp, $4), machine_id LIMIT 1`
		returning  = `RETURNING machine_id, prev_timestamp, last_timestamp, holder`
		// SQLite runs writers one at a time, so the candidate is still one
		// when the UPDATE changes it.
		claimSQLite = claimSet + `
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + `) AND {epoch $7}
` + returning
		// PostgreSQL: FOR UPDATE locks the candidate, re-checking it on the
		// newest version and moving on to the next if a racer changed it;
		// SKIP LOCKED passes over rows racers are claiming right now (and
		// rows being heartbeated or released at that instant). A miss
		// therefore means no row was claimable, not a lost race.
		claimPostgres = claimSet + `
WHERE namespace = $1 AND machine_id = (SELECT machine_id FROM {machine} WHERE ` + candidates + ` ` + order + ` FOR UPDATE SKIP LOCKED)
AND {epoch $7}
` + returning
		// InnoDB locks each row it examines, waiting for racers, and
		// evaluates WHERE on the newest version, so a miss means no row was
		// claimable; LAST_INSERT_ID carries the claimed number back.
		claimMySQL = claimSet + `, machine_id = LAST_INSERT_ID(machine_id)
WHERE ` + candidates + ` AND {epoch $7} ` + order
		claimed = `SELECT prev_timestamp, last_timestamp, holder FROM {machine} WHERE namespace = $1 AND machine_id = $2`
		next    = `SELECT COALESCE(MAX(machine_id) + 1, 0) FROM {machine} WHERE namespace = $1`
		columns = `INTO {machine} (namespace, machine_id, instance_id, holder, stable, last_timestamp, prev_timestamp, distribute_time, revert_time, version)`
		// $1 namespace, $2 instance, $3 stable, $4 now, $5 limit, $6 epoch,
		// $7 holder. The primary key turns away a number a racer inserted
		// first.
		insertReturning = `INSERT ` + columns + `
SELECT $1, next_id, CAST($2 AS VARCHAR(255)), CAST($7 AS VARCHAR(64)), CAST($3 AS BOOLEAN), CAST($4 AS BIGINT), 0, CAST($4 AS BIGINT), 0, 0
FROM (SELECT COALESCE(MAX(machine_id) + 1, 0) AS next_id FROM {machine} WHERE namespace = $1) AS n
WHERE next_id < $5 AND {epoch $6}
ON CONFLICT DO NOTHING
RETURNING machine_id`
		// $1 namespace, $2 machine ID, $3 instance, $4 stable, $5 now,
		// $6 epoch, $7 holder.
		insertMySQL = `INSERT IGNORE ` + columns + `
SELECT $1, $2, $3, $7, $4, $5, 0, $5, 0, 0 FROM {meta} WHERE name = 'epoch' AND value = $6`
		// $1 last timestamp, $2 namespace, $3 machine ID, $4 instance,
		// $5 epoch, $6 holder.
		guard = `UPDATE {machine} SET last_timestamp = {greatest}(last_timestamp, $1), version = version + 1
WHERE namespace = $2 AND machine_id = $3 AND instance_id = $4 AND holder = $6 AND {epoch $5}`
		// $1 keep (stable), $2 last timestamp, $3 now, $4 namespace,
		// $5 machine ID, $6 instance, $7 epoch, $8 holder.
		// Revert stores $2 as it is, even below what Guard raised: the
		// owner's last word covers every ID it issued, and a clean close
		// need not leave its reservation for the next holder to wait out.
		// The holding ends: a stable instance's next Distribute gets the
		// row at once.
		revert = `UPDATE {machine} SET instance_id = CASE WHEN $1 THEN instance_id END, holder = NULL,
last_timestamp = $2, revert_time = $3, version = version + 1
WHERE namespace = $4 AND machine_id = $5 AND instance_id = $6 AND holder = $8 AND {epoch $7}`
		holderOf = `SELECT instance_id, holder FROM {machine} WHERE namespace = $1 AND machine_id = $2`
	)
	stmt := func(src, keep string) *stmt {
		return s.stmt(greatest(s.cfg.Dialect, strings.ReplaceAll(src, "{keep}", keep)))
	}
	ms := machineStmts{next: stmt(next, ""), guard: stmt(guard, ""), revert: stmt(revert, ""), holderOf: stmt(holderOf, "")}
	switch s.cfg.Dialect {
	case schema.MySQL:
		ms.claim, ms.claimed, ms.insert = stmt(claimMySQL, `holder <> $10`), stmt(claimed, ""), stmt(insertMySQL, "")
		ms.serverTime = stmt(`SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`, "")
	case schema.Postgres:
		ms.claim, ms.insert = stmt(claimPostgres, live), stmt(insertReturning, "")
		ms.serverTime = stmt(`SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`, "")
	default:
		ms.claim, ms.insert = stmt(claimSQLite, live), stmt(insertReturning, "")
	}
	return ms
}

var _ machine.Distributor = (*Store)(nil)

// Terms are the store's: [Settings.RideThrough] and [Settings.ResetGrace]
// as resolved, and the last timestamps the machine table keeps.
func (s *Store) Terms() machine.Terms {
	return machine.Terms{RideThrough: s.cfg.RideThrough, ResetGrace: s.epoch.Grace(), Remembers: true}
}

// ServerTime reads the database server's clock, which a lease compares
// with its own. SQLite runs in this process, with no clock of its own: the
// zero time.
func (s *Store) ServerTime(ctx context.Context) (time.Time, error) {
	if s.mach.serverTime == nil {
		return time.Time{}, nil
	}
	var micros int64
	if _, err := s.mach.serverTime.queryRow(ctx, []any{&micros}); err != nil {
		return time.Time{}, s.unavailable("reading the server's clock", err)
	}
	return time.UnixMicro(micros), nil
}

// Distribute returns inst's machine ID: its own row if it has one, else
// the lowest row not stamped ahead of now that is free or whose unstable
// owner's last timestamp is at least safeGuard old, else the next unused
// number, else the free row stamped least far ahead. When all
// 2^machineBits are taken it returns an error wrapping
// engine.ErrMachineIDOverflow. A stable inst whose own row another process
// holds live (its holder stored a last timestamp within safeGuard and did
// not revert) gets an error wrapping engine.ErrInstanceInUse, and the row
// stays as it was. The State's LastTimestamp is the row's last timestamp
// before this call (0 for a new number), for the generator to wait out;
// the stored one rises to now. Its Holder is new and recorded in the row.
// Two instances racing never get the same machine ID. Every statement
// checks the store's epoch: a store that forgot its state gives an error
// wrapping engine.ErrStoreReset, and the next Distribute waits out the
// reset grace.
//
// Round trips, uncontended: the instance's own row or a reclaimed one costs
// one statement on PostgreSQL and SQLite and two on MySQL/MariaDB (which has
// no UPDATE … RETURNING: the claim's insert ID carries the machine ID, a
// second query its last timestamp and holder), and so does a refusal; a
// new number costs two on PostgreSQL and SQLite (the claim finds nothing,
// an INSERT … SELECT takes max+1) and three on MySQL/MariaDB (claim, read
// max+1, insert); a row stamped ahead, taken once no number is left, costs
// four (PostgreSQL and SQLite: claim, insert, read max+1, claim again;
// MySQL/MariaDB: claim, read max+1, claim again, read it).
func (s *Store) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
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
		c := claim{inst: inst, now: now, cutoff: now - guardMillis, live: math.MaxInt64, limit: limit,
			holder: machine.Holder(rand.Text()), token: token}
		if inst.Stable {
			c.live = now - holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough).Milliseconds()
		}
		got, ok, err := s.claim(ctx, c, now)
		if err != nil {
			return machine.State{}, s.unavailable(what, err)
		}
		if ok && got.holder == c.holder && got.id >= limit {
			// Our own row from a layout with more machine bits: give it back
			// and look again within the new limit.
			if err := s.revert(ctx, inst, false, got.state(), token); err != nil {
				return machine.State{}, err
			}
			continue
		}
		full := false
		if !ok {
			var st machine.State
			st, ok, full, err = s.insertNext(ctx, c)
			switch {
			case err != nil:
				return machine.State{}, s.unavailable(what, err)
			case ok:
				s.epoch.Held(string(st.Holder), token)
				return st, nil
			case full:
				// No number left: a free row stamped ahead of the clock.
				if got, ok, err = s.claim(ctx, c, math.MaxInt64); err != nil {
					return machine.State{}, s.unavailable(what, err)
				}
			}
		}
		switch {
		case ok && got.holder != c.holder:
			return machine.State{}, fmt.Errorf("%s: %s: %w: %s", s.name, what, engine.ErrInstanceInUse, holding.InUse(got.id, got.holder, got.last, holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough)))
		case ok:
			s.epoch.Held(string(got.holder), token)
			return got.state(), nil
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

// claim is one attempt of Distribute: its arguments, read once.
type claim struct {
	inst   machine.Instance
	now    int64 // Unix ms
	cutoff int64 // now - safeGuard: rows of unstable owners last heard of by then are reclaimable
	live   int64 // the own row is held live when its holder stored a later timestamp
	limit  int64 // 2^machineBits
	holder machine.Holder
	token  string // the epoch
}

// claimed is the row a claim matched: taken, when holder is the claim's;
// otherwise the instance's own row, held live by holder, which stored last.
type claimed struct {
	id, prev, last int64
	holder         machine.Holder
}

// state is what Distribute returns for a taken row.
func (c claimed) state() machine.State {
	return machine.State{MachineID: c.id, LastTimestamp: c.prev, Holder: c.holder}
}

// claim takes inst's own row or a reclaimable one stamped no later than
// bound in one conditional UPDATE; ok is false when there is none (or a
// racer changed it first, or the epoch is not c.token).
func (s *Store) claim(ctx context.Context, c claim, bound int64) (got claimed, ok bool, err error) {
	ms := s.mach
	args := []any{c.inst.Namespace, c.inst.ID, c.inst.Stable, c.now, c.cutoff, c.limit, c.token, c.live, bound, string(c.holder)}
	var holder sql.NullString
	if s.cfg.Dialect != schema.MySQL {
		ok, err = ms.claim.queryRow(ctx, []any{&got.id, &got.prev, &got.last, &holder}, args...)
		got.holder = machine.Holder(holder.String)
		return got, ok, err
	}
	res, err := ms.claim.exec(ctx, args...)
	if err != nil {
		return got, false, err
	}
	// version always changes, so a matched row counts as affected.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return got, false, err
	}
	if got.id, err = res.LastInsertId(); err != nil {
		return got, false, err
	}
	// The row is ours now, or kept by its live holder: no racer changes
	// prev_timestamp any more.
	ok, err = ms.claimed.queryRow(ctx, []any{&got.prev, &got.last, &holder}, c.inst.Namespace, got.id)
	if err == nil && !ok {
		err = fmt.Errorf("claimed machine ID %d vanished", got.id)
	}
	got.holder = machine.Holder(holder.String)
	return got, err == nil, err
}

// insertNext inserts the row max+1 for c.inst. ok reports success; full
// reports that max+1 is past the limit; neither means a racer inserted
// the same number (or this instance's row) first, or the epoch is not
// c.token.
func (s *Store) insertNext(ctx context.Context, c claim) (st machine.State, ok, full bool, err error) {
	ms := s.mach
	inst := c.inst
	st.Holder = c.holder
	var next int64
	if s.cfg.Dialect != schema.MySQL {
		ok, err = ms.insert.queryRow(ctx, []any{&st.MachineID}, inst.Namespace, inst.ID, inst.Stable, c.now, c.limit, c.token, string(c.holder))
		if err != nil || ok {
			return st, ok, false, err
		}
		if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
			return st, false, false, err
		}
		return st, false, next >= c.limit, nil
	}
	// MySQL: an INSERT … SELECT from the machine table would take shared
	// next-key locks on the scanned rows and deadlock against a racing one;
	// read max+1 with a plain consistent read and let the primary key
	// decide instead.
	if _, err = ms.next.queryRow(ctx, []any{&next}, inst.Namespace); err != nil {
		return st, false, false, err
	}
	if next >= c.limit {
		return st, false, true, nil
	}
	res, err := ms.insert.exec(ctx, inst.Namespace, next, inst.ID, inst.Stable, c.now, c.token, string(c.holder))
	if err != nil {
		return st, false, false, err
	}
	n, err := res.RowsAffected()
	st.MachineID = next
	return st, err == nil && n == 1, false, err
}

// Guard records st.LastTimestamp as the newest timestamp under inst's
// machine ID (the stored value never moves back). If the row no longer
// belongs to inst under st.Holder, because another instance reclaimed it
// after this one stalled past the safe-guard duration or another process
// with inst's ID took it over, it returns an error wrapping
// engine.ErrMachineIDLost that says who holds it; if the store forgot its
// state (its epoch changed), one wrapping engine.ErrStoreReset. An ID gone
// from the store altogether under the epoch it was handed out under means
// the store went back (IDs are never deleted): Guard declares it restored (a
// new epoch, every segment counter untrusted) and returns the reset error.
// Guard does not wait out a reset grace.
func (s *Store) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	token, sent := s.epoch.Token(), s.cfg.Clock.Now()
	res, err := s.mach.guard.exec(ctx, st.LastTimestamp, inst.Namespace, st.MachineID, inst.ID, token, string(st.Holder))
	if err := s.owned1(ctx, inst, st, "heartbeat", token, res, err); err != nil {
		return err
	}
	s.epoch.Confirm(sent)
	return nil
}

// Revert gives inst's machine ID back, saving st.LastTimestamp for the next
// owner (even below what Guard stored: see [machine.Distributor]) and
// ending the holding: an unstable instance frees the row, a stable one
// keeps it for its next Distribute. If the row no longer belongs to inst
// under st.Holder it returns an error wrapping engine.ErrMachineIDLost (or
// engine.ErrStoreReset when the store's epoch changed).
func (s *Store) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	return s.revert(ctx, inst, inst.Stable, st, s.epoch.Token())
}

func (s *Store) revert(ctx context.Context, inst machine.Instance, keep bool, st machine.State, token string) error {
	res, err := s.mach.revert.exec(ctx, keep, st.LastTimestamp, s.nowMillis(), inst.Namespace, st.MachineID, inst.ID, token, string(st.Holder))
	err = s.owned1(ctx, inst, st, "revert", token, res, err)
	if err == nil {
		s.epoch.Released(string(st.Holder))
	}
	return err
}

// owned1 turns the result of an UPDATE guarded by the owner, the holder and
// the epoch into an error: a database failure, a changed epoch, or no row
// (the machine ID was lost). Every such UPDATE bumps version, so one
// matched row is one affected row on MySQL too.
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
	held, gone := s.heldBy(ctx, inst, st)
	if gone && s.epoch.HeldUnder(string(st.Holder)) == token {
		// Gone altogether under the epoch it was handed out under: rows
		// are never deleted, so the store went back.
		return fmt.Errorf("%w (the machine ID is gone from the store: it lost committed writes; its epoch was replaced and every counter marked untrusted)",
			s.goneBack(ctx, token, what))
	}
	return fmt.Errorf("%s: %s: %w: %s", s.name, what, engine.ErrMachineIDLost, held)
}

// heldBy says who holds st.MachineID, for the error of a Guard or Revert
// that found the ID not held by inst under st.Holder; gone reports that
// the ID's row is not in the store at all.
func (s *Store) heldBy(ctx context.Context, inst machine.Instance, st machine.State) (held string, gone bool) {
	var owner, holder sql.NullString
	found, err := s.mach.holderOf.queryRow(ctx, []any{&owner, &holder}, inst.Namespace, st.MachineID)
	switch {
	case err != nil:
		return "the instance no longer holds it", false
	case !found:
		return "it was never handed out", true
	case !owner.Valid:
		return "it is free", false
	case owner.String != inst.ID:
		return fmt.Sprintf("instance %q holds it", owner.String), false
	}
	return holding.Taken(machine.Holder(holder.String), st.Holder), false
}

// checkInstance adds the columns' length limits to inst.Validate.
func checkInstance(inst machine.Instance) error {
	if err := distcheck.Instance(inst.Namespace, inst.ID); err != nil {
		return err
	}
	if err := checkName("namespace", inst.Namespace, maxName); err != nil {
		return err
	}
	return checkName("instance ID", inst.ID, maxInstance)
}
