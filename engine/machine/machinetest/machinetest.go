// Package machinetest checks machine.Distributor implementations against the
// contract documented on [machine.Distributor], and provides [NewMemory], an
// in-memory reference implementation for unit tests.
//
// A store implementation runs the suite from its own tests:
//
//	func TestMachineDistributor(t *testing.T) {
//		db := openTestDatabase(t)
//		machinetest.Run(t, func(t *testing.T, c clock.Clock) machine.Distributor {
//			return mystore.Open(db, mystore.Settings{Clock: c})
//		})
//	}
//
// The distributor must read "now" for its reclaim decisions from the clock it
// is given, so stores need a clock option: the suite drives a clocktest.Fake past
// the safe-guard duration instead of waiting for it.
package machinetest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/machine"
)

// safeGuard is the suite's safe-guard duration; the fake clock makes its
// length irrelevant to the run time.
const safeGuard = time.Minute

// start is where every case's fake clock begins.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// nonce makes namespaces unique across runs and cases, so a store may be
// shared between cases and between runs without cleaning it.
var nonce = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(time.Now().UnixNano())
	return &n
}()

// Run checks the distributor newDistributor builds against the contract of
// machine.Distributor, one subtest per rule: arguments validated (Validate);
// an instance gets its own ID back (Self); 64 racing instances get 64
// distinct IDs of 6 bits and the 65th ErrMachineIDOverflow (Race);
// namespaces are independent (Namespaces); Guard raises the stored timestamp
// and never lowers it, and fails with ErrMachineIDLost for IDs not held
// (GuardRaisesTimestamp); an unstable instance's Revert frees its ID with the
// reverted timestamp for the next holder, even below what Guard stored
// (RevertFreesUnstable); an ID silent
// for the safe-guard is reclaimed, and its old holder's Guard, Revert and
// Distribute neither succeed nor disturb the new holder (ExpiredIsReclaimed);
// 16 instances racing for 8 expired IDs: 8 get distinct ones, 8 overflow
// (ReclaimRace); a stable instance's ID is never reclaimed, whether it
// reverted or crashed, and comes back to it (StableIsReserved); a free ID
// stamped ahead of the clock goes out only after every other free ID and
// every new number, the least far ahead first (FutureStampedLast); Guard and
// Revert need the holder secret of the latest Distribute, and a second
// Distribute of an instance ends the first holding (Holder); a stable
// instance held live by another process is refused with ErrInstanceInUse
// until the holder reverts or stays silent for the safe-guard
// (StableHeldLiveRefused). (The registry's lease on a distributor is checked
// apart, by the tests of idforge's own stores.)
//
// newDistributor is called once per subtest with a fresh clocktest.Fake, which
// the distributor must read "now" from and must not sleep on. The distributor must be safe for concurrent use:
// up to 64 goroutines call it at once. Every subtest works in namespaces of
// its own, so all may share one store; they are made of letters, digits and
// '-'.
func Run(t *testing.T, newDistributor func(t *testing.T, c clock.Clock) machine.Distributor) {
	t.Helper()
	cases := []struct {
		name string
		run  func(*env)
	}{
		{"Validate", testValidate},
		{"Self", testSelf},
		{"Race", testRace},
		{"Namespaces", testNamespaces},
		{"GuardRaisesTimestamp", testGuard},
		{"RevertFreesUnstable", testRevert},
		{"ExpiredIsReclaimed", testExpired},
		{"ReclaimRace", testReclaimRace},
		{"StableIsReserved", testStable},
		{"FutureStampedLast", testFutureStamped},
		{"Holder", testHolder},
		{"StableHeldLiveRefused", testStableLive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			e := &env{t: t, clk: clk, ns: fmt.Sprintf("mt-%s-%d", c.name, nonce.Add(1))}
			e.d = newDistributor(t, clk)
			if e.d == nil {
				t.Fatal("newDistributor returned nil")
			}
			c.run(e)
		})
	}
}

type env struct {
	t   *testing.T
	clk *clocktest.Fake
	d   machine.Distributor
	ns  string
}

func (e *env) inst(id string) machine.Instance {
	return machine.Instance{Namespace: e.ns, ID: id}
}

func (e *env) stable(id string) machine.Instance {
	return machine.Instance{Namespace: e.ns, ID: id, Stable: true}
}

func (e *env) now() int64 { return e.clk.Now().UnixMilli() }

func (e *env) distribute(inst machine.Instance, bits int) machine.State {
	e.t.Helper()
	st, err := e.d.Distribute(e.t.Context(), inst, bits, safeGuard)
	if err != nil {
		e.t.Fatalf("Distribute(%v, %d bits): %v", inst, bits, err)
	}
	if st.MachineID < 0 || st.MachineID >= 1<<bits {
		e.t.Fatalf("Distribute(%v, %d bits) = machine ID %d, outside [0, %d)", inst, bits, st.MachineID, 1<<bits)
	}
	return st
}

func (e *env) overflow(inst machine.Instance, bits int) {
	e.t.Helper()
	st, err := e.d.Distribute(e.t.Context(), inst, bits, safeGuard)
	if !errors.Is(err, engine.ErrMachineIDOverflow) {
		e.t.Fatalf("Distribute(%v, %d bits) = %+v, %v; want an error wrapping ErrMachineIDOverflow", inst, bits, st, err)
	}
}

// at returns st, the same holding, with the last timestamp ts.
func at(st machine.State, ts int64) machine.State {
	st.LastTimestamp = ts
	return st
}

// wantState fails unless got is machine ID want.MachineID with last
// timestamp want.LastTimestamp (the holder is new at every Distribute).
func (e *env) wantState(what string, got, want machine.State) {
	e.t.Helper()
	if got.MachineID != want.MachineID || got.LastTimestamp != want.LastTimestamp {
		e.t.Fatalf("%s: got machine ID %d with LastTimestamp %d, want %d with %d", what, got.MachineID, got.LastTimestamp, want.MachineID, want.LastTimestamp)
	}
}

func (e *env) guard(inst machine.Instance, st machine.State) {
	e.t.Helper()
	if err := e.d.Guard(e.t.Context(), inst, st); err != nil {
		e.t.Fatalf("Guard(%v, %+v): %v", inst, st, err)
	}
}

func (e *env) revert(inst machine.Instance, st machine.State) {
	e.t.Helper()
	if err := e.d.Revert(e.t.Context(), inst, st); err != nil {
		e.t.Fatalf("Revert(%v, %+v): %v", inst, st, err)
	}
}

// lost asserts that Guard and Revert of st by inst both fail with
// ErrMachineIDLost.
func (e *env) lost(inst machine.Instance, st machine.State) {
	e.t.Helper()
	if err := e.d.Guard(e.t.Context(), inst, st); !errors.Is(err, engine.ErrMachineIDLost) {
		e.t.Errorf("Guard(%v, %+v) = %v; want an error wrapping ErrMachineIDLost", inst, st, err)
	}
	if err := e.d.Revert(e.t.Context(), inst, st); !errors.Is(err, engine.ErrMachineIDLost) {
		e.t.Errorf("Revert(%v, %+v) = %v; want an error wrapping ErrMachineIDLost", inst, st, err)
	}
}

// fill distributes IDs to n instances named prefix0..prefix<n-1>.
func (e *env) fill(prefix string, n, bits int) []machine.State {
	e.t.Helper()
	sts := make([]machine.State, n)
	for i := range sts {
		sts[i] = e.distribute(e.inst(prefix+strconv.Itoa(i)), bits)
	}
	return sts
}

// winner is who got a machine ID in a race, and the state they got.
type winner struct {
	inst machine.Instance
	st   machine.State
}

// race distributes to the given instances concurrently and returns each
// result; it fails the test on errors other than ErrMachineIDOverflow.
func (e *env) race(insts []machine.Instance, bits int) (ids map[int64]winner, overflows int) {
	e.t.Helper()
	sts := make([]machine.State, len(insts))
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, inst := range insts {
		wg.Go(func() {
			<-gate
			sts[i], errs[i] = e.d.Distribute(e.t.Context(), inst, bits, safeGuard)
		})
	}
	close(gate)
	wg.Wait()
	ids = map[int64]winner{}
	for i, err := range errs {
		switch {
		case errors.Is(err, engine.ErrMachineIDOverflow):
			overflows++
		case err != nil:
			e.t.Fatalf("racing Distribute(%v): %v", insts[i], err)
		default:
			id := sts[i].MachineID
			if other, dup := ids[id]; dup {
				e.t.Fatalf("machine ID %d handed to both %v and %v", id, other.inst, insts[i])
			}
			if id < 0 || id >= 1<<bits {
				e.t.Fatalf("machine ID %d for %v outside [0, %d)", id, insts[i], 1<<bits)
			}
			ids[id] = winner{insts[i], sts[i]}
		}
	}
	return ids, overflows
}

func testValidate(e *env) {
	bad := []struct {
		what string
		inst machine.Instance
		bits int
		sg   time.Duration
	}{
		{"empty namespace", machine.Instance{ID: "a"}, 10, safeGuard},
		{"empty instance ID", machine.Instance{Namespace: e.ns}, 10, safeGuard},
		{"0 machine bits", e.inst("a"), 0, safeGuard},
		{"too many machine bits", e.inst("a"), distcheck.MaxMachineBits + 1, safeGuard},
		{"zero safe-guard", e.inst("a"), 10, 0},
		{"negative safe-guard", e.inst("a"), 10, -time.Second},
	}
	for _, b := range bad {
		st, err := e.d.Distribute(e.t.Context(), b.inst, b.bits, b.sg)
		if !errors.Is(err, engine.ErrInvalidConfig) {
			e.t.Errorf("%s: Distribute = %+v, %v; want an error wrapping ErrInvalidConfig", b.what, st, err)
		}
	}
}

func testSelf(e *env) {
	a, b := e.inst("a"), e.inst("b")
	first := e.distribute(a, 4)
	if first.LastTimestamp != 0 {
		e.t.Errorf("new machine ID %d has LastTimestamp %d, want 0", first.MachineID, first.LastTimestamp)
	}
	other := e.distribute(b, 4)
	if other.MachineID == first.MachineID {
		e.t.Fatalf("instances a and b both got machine ID %d", first.MachineID)
	}
	e.clk.Advance(time.Second)
	again := e.distribute(a, 4)
	if again.MachineID != first.MachineID {
		e.t.Errorf("a distributed again got machine ID %d, want its own %d", again.MachineID, first.MachineID)
	}
	if again.LastTimestamp > e.now() {
		e.t.Errorf("a distributed again got LastTimestamp %d, ahead of the clock %d though nothing ran ahead", again.LastTimestamp, e.now())
	}
	e.guard(a, again)
	e.guard(b, other)
}

func testRace(e *env) {
	const bits = 6
	insts := make([]machine.Instance, 1<<bits)
	for i := range insts {
		insts[i] = e.inst("racer" + strconv.Itoa(i))
	}
	ids, overflows := e.race(insts, bits)
	if len(ids) != 1<<bits || overflows != 0 {
		e.t.Fatalf("%d racers got %d distinct machine IDs and %d overflows; want %d and 0", len(insts), len(ids), overflows, 1<<bits)
	}
	e.overflow(e.inst("one-too-many"), bits)
	for _, h := range ids {
		e.guard(h.inst, at(h.st, e.now()))
	}
}

func testNamespaces(e *env) {
	e.fill("a", 2, 1)
	e.overflow(e.inst("c"), 1)
	other := machine.Instance{Namespace: e.ns + "-other", ID: "c"}
	e.distribute(other, 1)
}

func testGuard(e *env) {
	a := e.inst("a")
	st := e.distribute(a, 4)
	ahead := e.now() + 10_000
	e.guard(a, at(st, ahead))
	got := e.distribute(a, 4)
	e.wantState(fmt.Sprintf("after Guard(LastTimestamp %d) Distribute", ahead), got, at(st, ahead))
	// An older, delayed heartbeat must not lower it.
	e.guard(a, at(got, ahead-5_000))
	if again := e.distribute(a, 4); again.LastTimestamp != ahead {
		e.t.Errorf("an older Guard lowered LastTimestamp from %d to %d", ahead, again.LastTimestamp)
	}
	e.lost(e.inst("intruder"), st)
	e.lost(a, machine.State{MachineID: st.MachineID + 1, LastTimestamp: e.now()})
}

func testRevert(e *env) {
	const bits = 2
	sts := e.fill("a", 1<<bits, bits)
	a, late := e.inst("a0"), e.inst("late")
	e.overflow(late, bits)
	// The heartbeat reserved 5 s ahead; the clean stop used only 3 s of it,
	// and the next holder must wait out those, not the reservation.
	e.guard(a, at(sts[0], e.now()+5_000))
	reverted := at(sts[0], e.now()+3_000)
	e.revert(a, reverted)

	got := e.distribute(late, bits)
	e.wantState("after a0 reverted, late", got, reverted)
	e.lost(a, reverted)
	e.guard(late, got) // a0's Revert above must not have freed it
	e.overflow(e.inst("later"), bits)
}

func testExpired(e *env) {
	const bits = 2
	sts := e.fill("a", 1<<bits, bits)
	t0 := e.now()
	e.guard(e.inst("a0"), at(sts[0], t0))
	e.clk.Advance(safeGuard - time.Millisecond)
	for i := 1; i < len(sts); i++ {
		e.guard(e.inst("a"+strconv.Itoa(i)), at(sts[i], e.now()))
	}
	late := e.inst("late")
	e.overflow(late, bits) // a0 is silent for 1ms less than the safe-guard

	e.clk.Advance(time.Millisecond)
	got := e.distribute(late, bits)
	e.wantState("a0 silent for the safe-guard: late", got, at(sts[0], t0))
	// a0 wakes up: its heartbeat and revert must fail and must not disturb late.
	e.lost(e.inst("a0"), sts[0])
	e.guard(late, got)
	e.overflow(e.inst("later"), bits)
	// Nor may a0 get its old ID back by asking again.
	e.overflow(e.inst("a0"), bits)
}

func testReclaimRace(e *env) {
	const bits = 3
	old := e.fill("old", 1<<bits, bits)
	e.clk.Advance(safeGuard)
	insts := make([]machine.Instance, 2<<bits)
	for i := range insts {
		insts[i] = e.inst("new" + strconv.Itoa(i))
	}
	ids, overflows := e.race(insts, bits)
	if len(ids) != 1<<bits || overflows != 1<<bits {
		e.t.Fatalf("%d racers for %d expired IDs: %d got one, %d overflowed; want %d and %d",
			len(insts), 1<<bits, len(ids), overflows, 1<<bits, 1<<bits)
	}
	for i, st := range old {
		e.lost(e.inst("old"+strconv.Itoa(i)), st)
	}
}

func testStable(e *env) {
	const bits = 2
	s1, s2 := e.stable("s1"), e.stable("s2")
	st1, st2 := e.distribute(s1, bits), e.distribute(s2, bits)
	reverted := at(st1, e.now()+3_000)
	e.revert(s1, reverted) // s2 crashes: it never reverts
	u1 := e.inst("u1")
	u1st := e.distribute(u1, bits)
	u2st := e.distribute(e.inst("u2"), bits)
	for _, u := range []machine.State{u1st, u2st} {
		if u.MachineID == st1.MachineID || u.MachineID == st2.MachineID {
			e.t.Fatalf("an unstable instance got machine ID %d of a stable one", u.MachineID)
		}
	}

	e.clk.Advance(10 * safeGuard)
	e.guard(u1, at(u1st, e.now()))
	// u2 expired and is reclaimed; the stable IDs are not, however old.
	ids, overflows := e.race([]machine.Instance{e.inst("u3"), e.inst("u4"), e.inst("u5")}, bits)
	if len(ids) != 1 || overflows != 2 {
		e.t.Fatalf("3 newcomers with one expired unstable ID: %d got one, %d overflowed; want 1 and 2", len(ids), overflows)
	}
	if _, ok := ids[u2st.MachineID]; !ok {
		e.t.Fatalf("newcomers got %v, want the expired u2's machine ID %d", ids, u2st.MachineID)
	}

	e.wantState("stable s1 back after Revert", e.distribute(s1, bits), reverted)
	if got := e.distribute(s2, bits); got.MachineID != st2.MachineID {
		e.t.Errorf("stable s2 back after a crash got machine ID %d, want its own %d", got.MachineID, st2.MachineID)
	}
}

// testFutureStamped: a process whose clock ran fast gave its IDs back
// stamped ahead of the clock. A newcomer would have to wait such an ID out,
// so it goes only once no other free ID and no new number is left, the
// least far ahead first.
func testFutureStamped(e *env) {
	const bits = 2
	sts := e.fill("a", 3, bits)
	now := e.now()
	far, near, past := at(sts[0], now+time.Hour.Milliseconds()), at(sts[1], now+time.Minute.Milliseconds()), at(sts[2], now-1_000)
	for i, st := range []machine.State{far, near, past} {
		e.revert(e.inst("a"+strconv.Itoa(i)), st)
	}
	e.wantState("b, with one free ID behind the clock", e.distribute(e.inst("b"), bits), past)
	if c := e.distribute(e.inst("c"), bits); c.MachineID == far.MachineID || c.MachineID == near.MachineID || c.LastTimestamp != 0 {
		e.t.Fatalf("c got machine ID %d with LastTimestamp %d; want the unused number, not %d or %d, which are stamped ahead of the clock",
			c.MachineID, c.LastTimestamp, far.MachineID, near.MachineID)
	}
	e.wantState("d, with only IDs stamped ahead left", e.distribute(e.inst("d"), bits), near)
	e.wantState("e, after d", e.distribute(e.inst("e"), bits), far)
	e.overflow(e.inst("f"), bits)
}

// testHolder: Guard and Revert prove the holding with the secret the latest
// Distribute returned. A second Distribute of an unstable instance (another
// process with its ID) takes the ID over: the first holder's heartbeat and
// revert fail, naming the holder they found by its fingerprint, and change
// nothing.
func testHolder(e *env) {
	a := e.inst("a")
	st := e.distribute(a, 4)
	if st.Holder == "" {
		e.t.Fatal("Distribute returned no Holder")
	}
	for _, forged := range []machine.Holder{"", "forged", st.Holder + "x"} {
		f := st
		f.Holder = forged
		e.lost(a, f)
	}
	e.guard(a, at(st, e.now())) // the refused calls changed nothing
	again := e.distribute(a, 4)
	if again.MachineID != st.MachineID || again.Holder == "" || again.Holder == st.Holder {
		e.t.Fatalf("a distributed again got %+v; want its machine ID %d under a new holder, not %s", again, st.MachineID, st.Holder)
	}
	err := e.d.Guard(e.t.Context(), a, st)
	if !errors.Is(err, engine.ErrMachineIDLost) || !strings.Contains(err.Error(), again.Holder.String()) {
		e.t.Errorf("the first holder's Guard = %v; want ErrMachineIDLost naming holder %s", err, again.Holder)
	}
	if err != nil && strings.Contains(err.Error(), string(again.Holder)) {
		e.t.Errorf("the Guard error shows the new holder's secret: %v", err)
	}
	e.lost(a, st)
	e.guard(a, again)
}

// testStableLive: one process holds a stable instance's ID live (it
// heartbeated within the safe-guard and did not revert). A second process
// with the same instance ID is refused with ErrInstanceInUse naming the
// instance, and the refusal changes nothing, not even how long the holder
// counts as live. Once the holder was silent for the safe-guard, the ID
// goes back to the instance under a new holder and the old one loses it;
// after a clean Revert it goes back at once.
func testStableLive(e *env) {
	const bits = 4
	s := e.stable("pod-7")
	first := e.distribute(s, bits)
	e.clk.Advance(safeGuard / 2)
	beat := e.now()
	e.guard(s, at(first, beat))
	e.inUse(s, bits)
	e.guard(s, at(first, beat)) // still the holder
	// How long a silent holder stays live is the store's (at least a
	// second, at most the safe-guard: engine/sqlstore and
	// engine/redisstore take their reset grace).
	e.clk.Advance(time.Second)
	e.inUse(s, bits)

	e.clk.Advance(safeGuard)
	second := e.distribute(s, bits)
	e.wantState("pod-7 after its holder was silent for the safe-guard", second, at(first, beat))
	if second.Holder == first.Holder {
		e.t.Fatalf("pod-7 got its ID back under the old holder %s", first.Holder)
	}
	e.lost(s, first)
	e.guard(s, at(second, e.now()))
	e.inUse(s, bits)

	e.revert(s, at(second, e.now()))
	if third := e.distribute(s, bits); third.MachineID != first.MachineID {
		e.t.Fatalf("pod-7 after a clean Revert got machine ID %d, want its own %d", third.MachineID, first.MachineID)
	}
	if u := e.distribute(e.inst("u"), bits); u.MachineID == first.MachineID {
		e.t.Fatalf("an unstable instance got stable pod-7's machine ID %d", u.MachineID)
	}
}

// inUse asserts that Distribute for inst fails with ErrInstanceInUse naming
// inst.
func (e *env) inUse(inst machine.Instance, bits int) {
	e.t.Helper()
	st, err := e.d.Distribute(e.t.Context(), inst, bits, safeGuard)
	if !errors.Is(err, engine.ErrInstanceInUse) || !strings.Contains(err.Error(), inst.ID) {
		e.t.Fatalf("Distribute(%v) = %+v, %v; want an error wrapping ErrInstanceInUse naming the instance", inst, st, err)
	}
}
