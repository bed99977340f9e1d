package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/holding"
	"github.com/idforge/idforge/engine/machine"
)

var (
	//go:embed scripts/machine_common.lua
	machineCommon string
	//go:embed scripts/machine_distribute.lua
	distributeSrc string
	//go:embed scripts/machine_guard.lua
	guardSrc string
	//go:embed scripts/machine_revert.lua
	revertSrc string

	distributeScript = redis.NewScript(epochCheck + machineCommon + distributeSrc)
	guardScript      = redis.NewScript(epochCheck + machineCommon + guardSrc)
	revertScript     = redis.NewScript(epochCheck + machineCommon + revertSrc)
)

var _ machine.Distributor = (*Store)(nil)

// Terms are the store's: [Settings.RideThrough] and [Settings.ResetGrace]
// as resolved, and the last timestamps its machines hash keeps.
func (s *Store) Terms() machine.Terms {
	return machine.Terms{RideThrough: s.cfg.RideThrough, ResetGrace: s.epoch.Grace(), Remembers: true}
}

// ServerTime reads the Redis server's clock (TIME), which a lease compares
// with its own.
func (s *Store) ServerTime(ctx context.Context) (time.Time, error) {
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, s.unavailable("reading the server's clock", err)
	}
	return t, nil
}

// Distribute returns inst's machine ID in [0, 2^machineBits): its own if it
// holds one, else a free one or one silent for at least safeGuard, not
// stamped ahead of now, else the next unused number, else the free one
// stamped least far ahead. When every number is held it returns an error
// wrapping engine.ErrMachineIDOverflow. A stable inst whose ID another
// process holds live (its holder stored a last timestamp within safeGuard
// and did not revert) gets an error wrapping engine.ErrInstanceInUse, and
// nothing changes. State.LastTimestamp is the last timestamp stored for the
// ID before this call, 0 for a number never used; State.Holder is new and
// recorded with the ID. It is one script, one round trip, that also checks
// the store's epoch: a store that forgot its state gives an error wrapping
// engine.ErrStoreReset, and the next Distribute waits out the reset grace.
func (s *Store) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	if safeGuard < time.Millisecond {
		// The scripts count in milliseconds: less would be zero, letting
		// anyone reclaim a live ID at once.
		return machine.State{}, fmt.Errorf("%w: redisstore: safe-guard duration %v is under 1ms", engine.ErrInvalidConfig, safeGuard)
	}
	what := fmt.Sprintf("namespace %q instance %q: distributing a machine ID", inst.Namespace, inst.ID)
	token, err := s.ready(ctx)
	if err != nil {
		return machine.State{}, err
	}
	holder := machine.Holder(rand.Text())
	res, err := distributeScript.Eval(ctx, s.client, s.machineKeys(inst),
		token, inst.ID, flag(inst.Stable), int64(1)<<machineBits, s.now(), safeGuard.Milliseconds(), string(holder),
		holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough).Milliseconds()).Slice()
	if err != nil {
		return machine.State{}, s.unavailable(what, err)
	}
	switch r := reply(res); r.kind() {
	case "ok":
		s.epoch.Held(string(holder), token)
		return machine.State{MachineID: r.int(1), LastTimestamp: r.int(2), Holder: holder}, nil
	case "live":
		return machine.State{}, fmt.Errorf("%s: %s: %w: %s", s.name, what, engine.ErrInstanceInUse,
			holding.InUse(r.int(1), machine.Holder(r.str(3)), r.int(2), holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough)))
	case "full":
		return machine.State{}, fmt.Errorf("%s: %s: %w: all %d IDs of %d machine bits in use, none free or silent for %v",
			s.name, what, engine.ErrMachineIDOverflow, int64(1)<<machineBits, machineBits, safeGuard)
	case "reset":
		return machine.State{}, s.reset(ctx, token, r.str(1), what)
	}
	return machine.State{}, s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
}

// Guard records that inst still holds st.MachineID under st.Holder, raising
// the stored last timestamp to st.LastTimestamp (never lowering it); a
// the registry's lease passes the heartbeat time, which keeps the ID from expiring.
// If inst no longer holds the ID under st.Holder (it was reclaimed after a
// long silence, reverted, or taken over by another process with inst's ID)
// Guard changes nothing and returns an error wrapping
// engine.ErrMachineIDLost that names the holder found; if the store forgot
// its state (its epoch changed), one wrapping engine.ErrStoreReset. An ID
// gone from the store altogether under the epoch it was handed out under
// means the store went back (IDs are never deleted): Guard declares it
// restored (a new epoch, every segment counter untrusted) and returns the
// reset error. Guard does not wait out a reset grace.
func (s *Store) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	return s.own(ctx, guardScript, "heartbeat", inst, st)
}

// Revert gives st.MachineID back, storing st.LastTimestamp for the next
// holder (even below what Guard stored: see [machine.Distributor]), and
// ends the holding. A stable instance keeps the ID for its next start. If
// inst no longer holds the ID under st.Holder Revert changes nothing and
// returns an error wrapping engine.ErrMachineIDLost (or
// engine.ErrStoreReset when the store's epoch changed).
func (s *Store) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	return s.own(ctx, revertScript, "revert", inst, st, flag(inst.Stable))
}

// own runs a script that acts on st.MachineID only while inst owns it
// under st.Holder.
func (s *Store) own(ctx context.Context, script *redis.Script, op string, inst machine.Instance, st machine.State, extra ...any) error {
	if err := distcheck.Instance(inst.Namespace, inst.ID); err != nil {
		return err
	}
	if st.MachineID < 0 {
		return fmt.Errorf("%w: redisstore: %s of negative machine ID %d", engine.ErrInvalidConfig, op, st.MachineID)
	}
	what := fmt.Sprintf("namespace %q instance %q: %s of machine ID %d", inst.Namespace, inst.ID, op, st.MachineID)
	token, sent := s.epoch.Token(), s.cfg.Clock.Now()
	args := append([]any{token, inst.ID, st.MachineID, st.LastTimestamp, string(st.Holder)}, extra...)
	res, err := script.Eval(ctx, s.client, s.machineKeys(inst), args...).Slice()
	if err != nil {
		return s.unavailable(what, err)
	}
	switch r := reply(res); r.kind() {
	case "ok":
		s.epoch.Confirm(sent)
		if op == "revert" {
			s.epoch.Released(string(st.Holder))
		}
		return nil
	case "lost":
		// Gone altogether under the epoch it was handed out under: IDs are
		// never deleted, so the store went back.
		if r.str(3) == "0" && s.epoch.HeldUnder(string(st.Holder)) == token {
			return fmt.Errorf("%w (the machine ID is gone from the store: it lost acknowledged writes; its epoch was replaced and every counter marked untrusted)",
				s.wentBack(ctx, token, what))
		}
		held := "it is free"
		switch owner := r.str(1); owner {
		case "":
		case inst.ID:
			held = holding.Taken(machine.Holder(r.str(2)), st.Holder)
		default:
			held = fmt.Sprintf("instance %q holds it", owner)
		}
		return fmt.Errorf("%s: %s: %w: %s", s.name, what, engine.ErrMachineIDLost, held)
	case "reset":
		return s.reset(ctx, token, r.str(1), what)
	}
	return s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
}

// machineKeys returns the epoch key and the namespace's instances hash,
// machines hash, reclaim set, free set and holders hash, which all share
// the store's hash tag.
func (s *Store) machineKeys(inst machine.Instance) []string {
	ns := s.base + "machine:" + inst.Namespace + ":"
	return []string{s.epochKey(), ns + "instances", ns + "machines", ns + "reclaim", ns + "free", ns + "holders"}
}

func (s *Store) now() int64 { return s.cfg.Clock.Now().UnixMilli() }

// flag is the scripts' form of a stable flag.
func flag(stable bool) string {
	if stable {
		return "1"
	}
	return "0"
}
