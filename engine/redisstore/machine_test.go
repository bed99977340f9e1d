package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/internal/leased/leasetest"
	"github.com/idforge/idforge/tests/testdb"
)

var fakeStart = time.UnixMilli(1_750_000_000_000)

const safeGuard = 5 * time.Minute

func inst(id string) machine.Instance { return machine.Instance{Namespace: "svc", ID: id} }

// machineEnv returns a machine distributor on a fake clock.
func machineEnv(t *testing.T) (*redisstore.Store, *clocktest.Fake, env) {
	t.Helper()
	fake := clocktest.NewFake(fakeStart)
	e := newEnv(t, redisstore.Settings{Clock: fake})
	return e.store, fake, e
}

func distribute(t *testing.T, d machine.Distributor, in machine.Instance, bits int) machine.State {
	t.Helper()
	st, err := d.Distribute(t.Context(), in, bits, safeGuard)
	if err != nil {
		t.Fatalf("Distribute(%s): %v", in.ID, err)
	}
	return st
}

func TestMachine64InstancesRaceFor6Bits(t *testing.T) {
	d, _, e := machineEnv(t)
	ctx := context.Background()
	const n = 64
	ids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	e.counter.take()
	for i := range n {
		wg.Go(func() {
			st, err := d.Distribute(ctx, inst(fmt.Sprintf("10.0.0.%d:8080", i)), 6, safeGuard)
			ids[i], errs[i] = st.MachineID, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	sorted := slices.Sorted(slices.Values(ids))
	for want, got := range sorted {
		if got != int64(want) {
			t.Fatalf("64 instances got machine IDs %v, want each of 0..63 once", sorted)
		}
	}
	if got := len(e.counter.take()); got != n {
		t.Fatalf("64 distributions sent %d commands, want one each", got)
	}

	_, err := d.Distribute(ctx, inst("10.0.0.64:8080"), 6, safeGuard)
	if !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Fatalf("65th instance: got %v, want ErrMachineIDOverflow", err)
	}
	for _, part := range []string{`"svc"`, "6 machine bits"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("overflow error %q should name %s", err, part)
		}
	}
}

func TestMachineReusesOwnID(t *testing.T) {
	d, fake, _ := machineEnv(t)
	a := distribute(t, d, inst("a"), 6)
	b := distribute(t, d, inst("b"), 6)
	fake.Advance(time.Second)
	again := distribute(t, d, inst("a"), 6)
	if a.MachineID != 0 || b.MachineID != 1 || again.MachineID != 0 {
		t.Fatalf("a=%d b=%d a again=%d, want 0, 1, 0", a.MachineID, b.MachineID, again.MachineID)
	}
	if a.LastTimestamp != 0 || again.LastTimestamp != fakeStart.UnixMilli() {
		t.Fatalf("last timestamps %d then %d, want 0 (new) then the first distribution's %d",
			a.LastTimestamp, again.LastTimestamp, fakeStart.UnixMilli())
	}
}

func TestMachineReclaimsExpiredAndOwnerLosesIt(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	a, b := inst("a"), inst("b")
	stA := distribute(t, d, a, 6)
	stB := distribute(t, d, b, 6)

	// b heartbeats half way; a stays silent.
	fake.Advance(safeGuard / 2)
	if err := d.Guard(ctx, b, machine.State{MachineID: stB.MachineID, LastTimestamp: fake.Now().UnixMilli(), Holder: stB.Holder}); err != nil {
		t.Fatal(err)
	}

	// One millisecond short of the safe guard, a's ID is not up for grabs.
	fake.Advance(fakeStart.Add(safeGuard - time.Millisecond).Sub(fake.Now()))
	if st := distribute(t, d, inst("c"), 6); st.MachineID != 2 {
		t.Fatalf("before expiry c got %d, want the new number 2", st.MachineID)
	}

	fake.Advance(fakeStart.Add(safeGuard).Sub(fake.Now()))
	st := distribute(t, d, inst("d"), 6)
	if st.MachineID != stA.MachineID || st.LastTimestamp != fakeStart.UnixMilli() {
		t.Fatalf("at expiry d got %+v, want a's machine ID %d with a's last timestamp %d",
			st, stA.MachineID, fakeStart.UnixMilli())
	}

	err := d.Guard(ctx, a, stA)
	if !errors.Is(err, engine.ErrMachineIDLost) || !strings.Contains(err.Error(), `"d"`) {
		t.Fatalf("a's guard after reclaim: got %v, want ErrMachineIDLost naming the new owner", err)
	}
	if err := d.Revert(ctx, a, stA); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("a's revert after reclaim: got %v, want ErrMachineIDLost", err)
	}
	if err := d.Guard(ctx, b, stB); err != nil {
		t.Fatalf("b heartbeated in time and keeps its ID: %v", err)
	}
	// a comes back as a newcomer: its old ID is d's now.
	if st := distribute(t, d, a, 6); st.MachineID != 3 {
		t.Fatalf("a after losing its ID got %d, want the new number 3", st.MachineID)
	}
}

func TestMachineGuardRenewsExpiredButUnclaimedID(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	a := inst("a")
	stA := distribute(t, d, a, 6)
	// Expired but nobody took it yet: a still holds it and its heartbeat
	// restarts the safe guard.
	fake.Advance(2 * safeGuard)
	if err := d.Guard(ctx, a, machine.State{MachineID: stA.MachineID, LastTimestamp: fake.Now().UnixMilli(), Holder: stA.Holder}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(safeGuard - time.Millisecond)
	if st := distribute(t, d, inst("b"), 6); st.MachineID == stA.MachineID {
		t.Fatalf("b took a's ID %d although a heartbeated within the safe guard", st.MachineID)
	}
}

func TestMachineRevertFreesUnstableID(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	a := inst("a")
	stA := distribute(t, d, a, 6)
	distribute(t, d, inst("b"), 6)
	last := fakeStart.Add(10 * time.Second).UnixMilli() // ahead of the clock: must survive
	if err := d.Revert(ctx, a, machine.State{MachineID: stA.MachineID, LastTimestamp: last, Holder: stA.Holder}); err != nil {
		t.Fatal(err)
	}
	if err := d.Guard(ctx, a, stA); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("guard after revert: got %v, want ErrMachineIDLost", err)
	}
	// A free ID is taken before any new number once the clock passed its
	// saved timestamp (before, it goes out last), with that timestamp.
	fake.Advance(11 * time.Second)
	st := distribute(t, d, inst("c"), 6)
	if st.MachineID != stA.MachineID || st.LastTimestamp != last {
		t.Fatalf("c got %+v, want the reverted ID %d with last timestamp %d", st, stA.MachineID, last)
	}
}

func TestMachineStableKeepsID(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	s := machine.Instance{Namespace: "svc", ID: "pod-0", Stable: true}
	stS := distribute(t, d, s, 6)
	last := fakeStart.Add(time.Second).UnixMilli()
	if err := d.Revert(ctx, s, machine.State{MachineID: stS.MachineID, LastTimestamp: last, Holder: stS.Holder}); err != nil {
		t.Fatal(err)
	}
	// Neither a revert nor any silence frees a stable instance's ID.
	fake.Advance(10 * safeGuard)
	if st := distribute(t, d, inst("a"), 6); st.MachineID == stS.MachineID {
		t.Fatalf("unstable instance took stable pod-0's ID %d", st.MachineID)
	}
	st := distribute(t, d, s, 6)
	if st.MachineID != stS.MachineID || st.LastTimestamp != last {
		t.Fatalf("pod-0 restarted with %+v, want its ID %d and saved timestamp %d", st, stS.MachineID, last)
	}
}

func TestMachineRevertAsStableKeepsUnstableIDHeld(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	a := inst("a")
	stA := distribute(t, d, a, 6)
	// Distributed as unstable, reverted as stable: a keeps the ID, which
	// stays reclaimable, but only a safe guard after the saved timestamp.
	last := fakeStart.Add(10 * time.Second)
	stable := machine.Instance{Namespace: a.Namespace, ID: a.ID, Stable: true}
	if err := d.Revert(ctx, stable, machine.State{MachineID: stA.MachineID, LastTimestamp: last.UnixMilli(), Holder: stA.Holder}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(last.Add(safeGuard - time.Millisecond).Sub(fake.Now()))
	if st := distribute(t, d, inst("b"), 6); st.MachineID == stA.MachineID {
		t.Fatalf("b took a's ID %d before a safe guard passed since a's saved timestamp", st.MachineID)
	}
	fake.Advance(last.Add(safeGuard).Sub(fake.Now()))
	if st := distribute(t, d, inst("c"), 6); st.MachineID != stA.MachineID {
		t.Fatalf("c got %d, want a's expired ID %d", st.MachineID, stA.MachineID)
	}
}

func TestMachineRevertByOtherChangesNothing(t *testing.T) {
	ctx := context.Background()
	d, fake, _ := machineEnv(t)
	stA := distribute(t, d, inst("a"), 6)
	err := d.Revert(ctx, inst("intruder"), stA)
	if !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("revert by a non-owner: got %v, want ErrMachineIDLost", err)
	}
	if err := d.Guard(ctx, inst("x"), machine.State{MachineID: 42}); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("guard of a never-distributed ID: got %v, want ErrMachineIDLost", err)
	}
	fake.Advance(time.Second)
	if st := distribute(t, d, inst("b"), 6); st.MachineID == stA.MachineID {
		t.Fatalf("b got a's ID %d after a non-owner's revert", st.MachineID)
	}
	if err := d.Guard(ctx, inst("a"), stA); err != nil {
		t.Fatalf("a still owns its ID: %v", err)
	}
}

func TestMachineNarrowerLayoutNeverGetsOutOfRangeID(t *testing.T) {
	ctx := context.Background()
	d, _, _ := machineEnv(t)
	distribute(t, d, inst("a"), 1)
	distribute(t, d, inst("b"), 1)
	if _, err := d.Distribute(ctx, inst("c"), 1, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Fatalf("third instance with 1 bit: got %v, want ErrMachineIDOverflow", err)
	}
	if st := distribute(t, d, inst("c"), 2); st.MachineID != 2 {
		t.Fatalf("c with 2 bits got %d, want 2", st.MachineID)
	}
	// c asks again with 1 bit: its ID 2 does not fit, so it gives it back
	// rather than return an ID outside [0, 2).
	if _, err := d.Distribute(ctx, inst("c"), 1, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Fatalf("c with 1 bit: got %v, want ErrMachineIDOverflow", err)
	}
	if st := distribute(t, d, inst("e"), 2); st.MachineID != 2 {
		t.Fatalf("e with 2 bits got %d, want c's freed ID 2", st.MachineID)
	}
}

func TestMachineOneRoundTripPerCall(t *testing.T) {
	ctx := context.Background()
	d, _, e := machineEnv(t)
	distribute(t, d, inst("a"), 6) // a busy namespace: reclaim set not empty
	e.counter.take()
	b := inst("b")
	st := distribute(t, d, b, 6)
	if got := e.counter.take(); !slices.Equal(got, []string{"eval"}) {
		t.Fatalf("new distribution sent %v, want [eval]", got)
	}
	calls := []struct {
		name string
		do   func() error
	}{
		{"distribute", func() error { var err error; st, err = d.Distribute(ctx, b, 6, safeGuard); return err }},
		{"guard", func() error { return d.Guard(ctx, b, st) }},
		{"revert", func() error { return d.Revert(ctx, b, st) }},
	}
	for _, c := range calls {
		if err := c.do(); err != nil {
			t.Fatal(err)
		}
		if got := e.counter.take(); !slices.Equal(got, []string{"eval"}) {
			t.Fatalf("%s sent %v, want [eval]", c.name, got)
		}
	}
}

func TestMachineRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	d := downStore(t)
	good := inst("a")
	distCases := map[string]struct {
		in    machine.Instance
		bits  int
		guard time.Duration
	}{
		"empty namespace":   {machine.Instance{ID: "a"}, 6, safeGuard},
		"empty instance":    {machine.Instance{Namespace: "svc"}, 6, safeGuard},
		"zero bits":         {good, 0, safeGuard},
		"too many bits":     {good, distcheck.MaxMachineBits + 1, safeGuard},
		"no safe guard":     {good, 6, 0},
		"negative guard":    {good, 6, -time.Second},
		"sub-ms safe guard": {good, 6, time.Microsecond},
	}
	for name, c := range distCases {
		t.Run(name, func(t *testing.T) {
			if _, err := d.Distribute(ctx, c.in, c.bits, c.guard); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
	if err := d.Guard(ctx, good, machine.State{MachineID: -1}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("guard of machine ID -1: got %v, want ErrInvalidConfig", err)
	}
	if err := d.Revert(ctx, machine.Instance{ID: "a"}, machine.State{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("revert without namespace: got %v, want ErrInvalidConfig", err)
	}
	// Valid arguments reach the (dead) store.
	if _, err := d.Distribute(ctx, good, 6, safeGuard); !errors.Is(err, engine.ErrStoreUnavailable) ||
		!strings.Contains(err.Error(), `"svc"`) {
		t.Fatalf("distribute on a dead store: got %v, want ErrStoreUnavailable naming the namespace", err)
	}
}

func TestMachineConformance(t *testing.T) {
	client, prefix := testdb.Redis(t)
	distributors := func(t *testing.T, c clock.Clock) machine.Distributor {
		d, err := redisstore.Open(t.Context(), client, with(testOptions(prefix), redisstore.Settings{Clock: c}))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	machinetest.Run(t, distributors)
	leasetest.Run(t, distributors)
}

// TestMachineDataFromBeforeHolders: a store written before free IDs had a
// set of their own (they sat in the reclaim set at -inf) and before
// holdings were recorded. Its free IDs move to the free set, one stamped
// ahead of the clock going out last, and a stable instance's ID, with no
// holding on record, goes back to it.
func TestMachineDataFromBeforeHolders(t *testing.T) {
	ctx := context.Background()
	d, fake, e := machineEnv(t)
	ns := strings.TrimSuffix(d.EpochKey(), "epoch") + "machine:svc:"
	now := fake.Now().UnixMilli()
	old := e.client.TxPipeline()
	old.HSet(ctx, ns+"machines", "0", fmt.Sprintf("%d|0|", now+time.Hour.Milliseconds()), "1", fmt.Sprintf("%d|0|", now-1000),
		"2", fmt.Sprintf("%d|1|pod-0", now))
	old.ZAdd(ctx, ns+"reclaim", redis.Z{Score: math.Inf(-1), Member: "0"}, redis.Z{Score: math.Inf(-1), Member: "1"})
	old.HSet(ctx, ns+"instances", "pod-0", "2")
	if _, err := old.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	pod := machine.Instance{Namespace: "svc", ID: "pod-0", Stable: true}
	if st := distribute(t, d, pod, 2); st.MachineID != 2 || st.LastTimestamp != now {
		t.Fatalf("pod-0 got %+v, want its machine ID 2 with LastTimestamp %d", st, now)
	}
	for _, want := range []struct {
		id      string
		machine int64
		last    int64
	}{{"a", 1, now - 1000}, {"b", 3, 0}, {"c", 0, now + time.Hour.Milliseconds()}} {
		if st := distribute(t, d, inst(want.id), 2); st.MachineID != want.machine || st.LastTimestamp != want.last {
			t.Fatalf("%s got %+v, want machine ID %d with LastTimestamp %d", want.id, st, want.machine, want.last)
		}
	}
	if n, err := e.client.ZCount(ctx, ns+"reclaim", "-inf", "-inf").Result(); err != nil || n != 0 {
		t.Fatalf("reclaim set still holds %d IDs at -inf (%v)", n, err)
	}
}
