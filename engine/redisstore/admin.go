package redisstore

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/holding"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
)

// OpenAdmin opens the store on client for the operator's commands, as
// [Open] does, but does not refuse a ride-through window the store records
// that differs from Settings.RideThrough: the commands hold no machine ID,
// and SetRideThrough rewrites the window. The caller keeps the client.
func OpenAdmin(ctx context.Context, client redis.Cmdable, settings ...Settings) (machine.Admin, error) {
	s, err := open(ctx, client, true, settings)
	if err != nil {
		return nil, err
	}
	return admin{s}, nil
}

// admin implements the operator's commands on a store: [machine.Admin].
type admin struct{ *Store }

var _ machine.Admin = admin{}

// The operator's commands (`idforge store`) ignore the epoch, which an
// operator reads and acts on as it is; only RaiseCounter, which writes a
// counter the generators' floors are checked against, runs under it.
var (
	//go:embed scripts/machine_list.lua
	listSrc string
	//go:embed scripts/machine_release.lua
	releaseSrc string

	listScript    = redis.NewScript(machineCommon + listSrc)
	releaseScript = redis.NewScript(machineCommon + releaseSrc)
)

// machineValue parses the machines hash's "lastTimestamp|stable|instance".
var machineValue = regexp.MustCompile(`^(-?\d+)\|([01])\|(.*)$`)

// Machines lists the machine IDs of namespace, in order: every ID ever
// handed out, with its instance (none once free), whether a holding of it
// is live (its holder did not revert it) and its last timestamp. One
// script reads them all at once.
func (s admin) Machines(ctx context.Context, namespace string) ([]machine.Assignment, error) {
	if err := distcheck.Text("redisstore", "namespace", namespace); err != nil {
		return nil, err
	}
	res, err := listScript.Eval(ctx, s.client, s.machineKeys(machine.Instance{Namespace: namespace})).StringSlice()
	if err != nil {
		return nil, s.unavailable("listing machine IDs", err)
	}
	if len(res)%3 != 0 {
		return nil, s.unavailable("listing machine IDs", fmt.Errorf("%w %v", errBadReply, res))
	}
	as := make([]machine.Assignment, 0, len(res)/3)
	for i := 0; i < len(res); i += 3 {
		id, err := strconv.ParseInt(res[i], 10, 64)
		m := machineValue.FindStringSubmatch(res[i+1])
		if err != nil || m == nil {
			return nil, s.unavailable("listing machine IDs", fmt.Errorf("%w: machine ID %q: %q", errBadReply, res[i], res[i+1]))
		}
		last, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, s.unavailable("listing machine IDs", fmt.Errorf("%w: machine ID %q: %q", errBadReply, res[i], res[i+1]))
		}
		as = append(as, machine.Assignment{
			MachineID:     id,
			Instance:      machine.Instance{Namespace: namespace, ID: m[3], Stable: m[2] == "1"},
			Held:          res[i+2] == "1",
			LastTimestamp: last,
		})
	}
	slices.SortFunc(as, func(a, b machine.Assignment) int { return cmp.Compare(a.MachineID, b.MachineID) })
	return as, nil
}

// Release gives machineID of namespace back, keeping its last timestamp for
// the next holder to wait out. A holding heartbeated within the reset grace
// is live and refused with an error wrapping engine.ErrInstanceInUse unless
// force is set: its holder would find the ID gone at its next heartbeat and
// stop issuing under it. An ID never handed out is an error wrapping
// engine.ErrInvalidConfig. The check and the release are one script.
func (s admin) Release(ctx context.Context, namespace string, machineID int64, force bool) error {
	now, window := s.now(), holding.LiveWindow(s.cfg.ResetGrace, s.cfg.RideThrough)
	res, err := releaseScript.Eval(ctx, s.client, s.machineKeys(machine.Instance{Namespace: namespace}),
		"", machineID, now, window.Milliseconds(), flag(force)).Slice()
	if err != nil {
		return s.unavailable("releasing a machine ID", err)
	}
	switch r := reply(res); r.kind() {
	case "ok":
		return nil
	case "unknown":
		return fmt.Errorf("%s: namespace %q: machine ID %d was never handed out: %w", s.name, namespace, machineID, engine.ErrInvalidConfig)
	case "live":
		a := machine.Assignment{MachineID: machineID, Held: true, LastTimestamp: r.int(3),
			Instance: machine.Instance{Namespace: namespace, ID: r.str(1), Stable: r.str(2) == "1"}}
		if err := holding.CheckRelease(a, now, window, false); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return s.unavailable("releasing a machine ID", fmt.Errorf("%w %v", errBadReply, res))
}

// Counter returns the largest ID the sequence name handed out ranges up to
// (its counter); found is false when the store has no such sequence.
func (s admin) Counter(ctx context.Context, name string) (counter int64, found bool, err error) {
	if err := distcheck.Text("redisstore", "sequence", name); err != nil {
		return 0, false, err
	}
	counter, err = s.client.Get(ctx, s.segmentKey(name)).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, false, nil
	case err != nil:
		return 0, false, s.unavailable("reading sequence "+name, err)
	}
	return counter, true, nil
}

// RaiseCounter raises the sequence name's counter to at least to, never
// lowering it, creating the sequence there (or at [Settings.Start], if
// higher) if it is missing (the operator vouches no ID above to was handed
// out), and returns the counter. It is the segment script's raise, under
// the store's epoch, like a re-seed after a reset: a counter that only
// goes up stays at or above every process's floor. A store whose epoch
// changed is left as it is, with an error wrapping engine.ErrStoreReset.
func (s admin) RaiseCounter(ctx context.Context, name string, to int64) (int64, error) {
	if err := distcheck.Text("redisstore", "sequence", name); err != nil {
		return 0, err
	}
	what := "raising sequence " + name
	token, err := s.ready(ctx)
	if err != nil {
		return 0, err
	}
	// The script compares non-negative decimals; a counter is never below
	// 0, so a lower target raises nothing.
	res, err := segmentScript.Eval(ctx, s.client, s.segmentKeys(name),
		token, 0, s.cfg.Start, max(to, 0), "", "0", "0", name).Slice()
	if err != nil {
		return 0, s.unavailable(what, err)
	}
	switch r := reply(res); r.kind() {
	case "ok":
		if c, err := strconv.ParseInt(r.str(1), 10, 64); err == nil {
			return c, nil
		}
	case "reset":
		return 0, s.reset(ctx, token, r.str(1), what)
	}
	return 0, s.unavailable(what, fmt.Errorf("%w %v", errBadReply, res))
}

// Restored declares the store restored: one script gives the store a new
// epoch and marks every counter untrusted. Processes of the old epoch see
// a reset at their next operation, wait the reset grace and re-seed what
// they used above what they got; every other counter is served only above
// a Floor or after RaiseCounter.
func (s admin) Restored(ctx context.Context) error {
	if _, err := s.declareRestored(ctx, ""); err != nil {
		return s.unavailable("declaring the store restored", err)
	}
	return nil
}

// SetRideThrough rewrites the ride-through window the store records. A
// machine ID of any namespace whose stored last timestamp is within the old
// window's reset grace of now may have a holder issuing under the old
// window, so that is refused unless force is set. The namespaces are found
// with SCAN on the client's node (the store's keys share one hash slot).
func (s admin) SetRideThrough(ctx context.Context, w time.Duration, force bool) (time.Duration, error) {
	if err := storeepoch.CheckRideThrough("the ride-through window", w); err != nil {
		return 0, err
	}
	w = storeepoch.ResolveRideThrough(w)
	rec, err := s.client.Get(ctx, s.rideKey()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, s.unavailable("reading the ride-through window", err)
	}
	old, _ := storeepoch.ParseRecord(rec)
	if !force {
		newest, err := s.newestHeld(ctx)
		if err != nil {
			return 0, err
		}
		if err := storeepoch.CheckQuiet(s.name, newest, s.now(), old); err != nil {
			return 0, err
		}
	}
	if err := s.client.Set(ctx, s.rideKey(), storeepoch.FormatRecord(w), 0).Err(); err != nil {
		return 0, s.unavailable("recording the ride-through window", err)
	}
	return old, nil
}

// newestHeld returns the newest last timestamp of a held machine ID of any
// namespace, 0 for none.
func (s admin) newestHeld(ctx context.Context) (int64, error) {
	prefix := s.base + "machine:"
	const suffix = ":holders"
	var newest int64
	iter := s.client.Scan(ctx, 0, globEscape(prefix)+"*"+suffix, 100).Iterator()
	for iter.Next(ctx) {
		ns := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), prefix), suffix)
		as, err := s.Machines(ctx, ns)
		if err != nil {
			return 0, err
		}
		for _, a := range as {
			if a.Held {
				newest = max(newest, a.LastTimestamp)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, s.unavailable("listing the namespaces", err)
	}
	return newest, nil
}

// globEscape quotes the glob characters of SCAN's MATCH in s.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}
