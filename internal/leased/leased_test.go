package leased_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/leased"
)

func inst(id string) machine.Instance { return machine.Instance{Namespace: "orders", ID: id} }

func newSF(t *testing.T, s leased.Settings) *leased.Snowflake {
	t.Helper()
	sf, err := leased.New(context.Background(), s)
	if err != nil {
		t.Fatalf("New(%s): %v", s.Instance.Namespace+"/"+s.Instance.ID, err)
	}
	t.Cleanup(func() { sf.Close() })
	return sf
}

func next(t *testing.T, sf *leased.Snowflake) int64 {
	t.Helper()
	id, err := sf.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func machineOf(t *testing.T, id int64) int64 {
	t.Helper()
	_, machine, _, err := snowflake.Default.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	return machine
}

// The composition owns the machine bits, the fence's timestamp source and
// the clock (machine.Settings has no field for them); what it is handed
// must still be whole.
func TestOwnedInvariantsRefused(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	for _, c := range []struct {
		name string
		set  leased.Settings
		want string
	}{
		{"no distributor", leased.Settings{}, "Distributor is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.set
			s.Instance = inst("a")
			if c.name != "no distributor" {
				s.Distributor = mem
			}
			sf, err := leased.New(context.Background(), s)
			if err == nil {
				sf.Close()
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v; want ErrInvalidConfig saying %q", err, c.want)
			}
		})
	}
	// Repeating the layout's bits is no contradiction.
	newSF(t, leased.Settings{Distributor: mem, Instance: inst("b")})
}

// A process that stalls past the safe-guard loses its machine ID to another
// instance; when it wakes it must not issue on that ID again, but move to a
// new one, above every timestamp it used before.
func TestStalledInstanceMovesToANewMachineID(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	storeClock := clocktest.NewFake(start) // the store judges expiry by this one
	storeClock.ManualSleep = true
	aClock := clocktest.NewFake(start) // instance A's own clock: frozen while it stalls
	aClock.ManualSleep = true
	mem := machinetest.NewMemory(storeClock)
	set := func(id string, c clock.Clock) leased.Settings {
		return leased.Settings{Distributor: mem, Instance: inst(id), Snowflake: snowflake.Settings{Clock: c},
			Lease: machine.Settings{SafeGuard: 5 * time.Second, Heartbeat: time.Second}}
	}
	a := newSF(t, set("a", aClock))
	lastA := next(t, a)
	if m := machineOf(t, lastA); m != 0 {
		t.Fatalf("A's machine = %d, want 0", m)
	}
	// A stalls: the store's clock moves 10 s on, A's does not, so A does
	// not heartbeat and B reclaims A's expired machine ID.
	storeClock.Advance(10 * time.Second)
	b := newSF(t, set("b", storeClock))
	if m := machineOf(t, next(t, b)); m != 0 {
		t.Fatalf("B's machine = %d, want 0 (A's, reclaimed)", m)
	}
	// A wakes up, its clock stepped back behind what it used: a generator
	// that restarted from the store's timestamp for its new ID would reuse
	// A's milliseconds.
	aClock.Advance(10 * time.Second)
	id := next(t, a)
	if m := machineOf(t, id); m == 0 {
		t.Fatal("A issued on machine 0 after B reclaimed it: duplicates possible")
	}
	if a.Lost() != 1 {
		t.Fatalf("Lost() = %d, want 1", a.Lost())
	}
	ta, _, _, _ := snowflake.Default.Decode(lastA)
	tn, _, _, _ := snowflake.Default.Decode(id)
	if !tn.After(ta) {
		t.Fatalf("A's new generator issued at %v, not after its old one's %v", tn, ta)
	}
}

// resettable is a store that forgets everything (a Redis restarted without
// persistence) and says so on the next call.
type resettable struct {
	machine.Distributor
	reset atomic.Bool
}

func (r *resettable) Guard(ctx context.Context, in machine.Instance, st machine.State) error {
	if r.reset.CompareAndSwap(true, false) {
		r.Distributor = machinetest.NewMemory(nil)
		return engine.ErrStoreReset
	}
	return r.Distributor.Guard(ctx, in, st)
}

// A lease swap after a store reset carries the last tick: the wiped store
// hands the same machine ID back with last timestamp 0, yet the new
// generator never issues at or below the old generator's newest tick, even
// within the same millisecond.
func TestResetCarriesLastTick(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	clk.ManualSleep = true
	store := &resettable{Distributor: machinetest.NewMemory(nil)}
	var resets atomic.Int64
	sf := newSF(t, leased.Settings{Distributor: store, Instance: inst("a"), Snowflake: snowflake.Settings{Clock: clk},
		Lease: machine.Settings{Heartbeat: time.Second}, Reservation: -1,
		OnReset: func(err error) {
			if errors.Is(err, engine.ErrStoreReset) {
				resets.Add(1)
			}
		}})
	var last int64
	for range 3000 { // one tick, most of its sequence
		last = next(t, sf)
	}
	// A wait for a clock stepped back, counted again after the swap. The
	// clock moves back only once the generator waits on it: the heartbeat
	// goroutine is asleep 1 s ahead first, so the next Sleep is the wait.
	eventually(t, "heartbeat goroutine asleep", func() bool { return clk.Sleeps() > 0 })
	clk.Advance(-time.Millisecond)
	stop := advanceOnSleep(clk, time.Millisecond)
	last = next(t, sf)
	stop()
	store.reset.Store(true)
	if err := sf.Lease().Heartbeat(context.Background()); !errors.Is(err, engine.ErrStoreReset) || !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("heartbeat on a reset store: %v; want ErrMachineIDLost and ErrStoreReset", err)
	}
	eventually(t, "OnReset called", func() bool { return resets.Load() > 0 })
	if resets.Load() != 1 {
		t.Fatalf("OnReset called %d times, want 1", resets.Load())
	}
	// The clock still reads the old generator's tick: the new generator
	// must wait for the next one (the clock moves once it waits), where a
	// generator starting from the store's 0 would issue at once, on it.
	stop = advanceOnSleep(clk, time.Millisecond)
	id := next(t, sf)
	stop()
	if machineOf(t, id) != machineOf(t, last) {
		t.Fatalf("the wiped store should hand the same machine ID back")
	}
	if id <= last {
		t.Fatalf("after the swap: %d, not above the old generator's %d", id, last)
	}
}

// advanceOnSleep moves clk (a ManualSleep fake) on by step each time a
// Sleep on it begins, until stop is called: whoever waits on the clock
// wakes, however late it starts waiting, and the clock stands still until
// someone does.
func advanceOnSleep(clk *clocktest.Fake, step time.Duration) (stop func()) {
	done, over := make(chan struct{}), make(chan struct{})
	seen := clk.Sleeps()
	go func() {
		defer close(over)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			if n := clk.Sleeps(); n > seen {
				seen = n
				clk.Advance(step)
			}
		}
	}()
	return func() { close(done); <-over }
}

// hangingGuard is a store whose Guard stops answering (a dropped
// connection) once hang is set: it tells hanging, then returns only when
// its ctx ends.
type hangingGuard struct {
	machine.Distributor
	hang    *atomic.Bool
	hanging chan struct{}
}

func (d hangingGuard) Guard(ctx context.Context, in machine.Instance, st machine.State) error {
	if d.hang.Load() {
		select {
		case d.hanging <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return engine.ErrStoreUnavailable
	}
	return d.Distributor.Guard(ctx, in, st)
}

// When the lease has lapsed, NextID probes the store with a Heartbeat, which
// first takes the lease's mutex: the scheduled heartbeat may hold it for its
// whole Guard call. A caller with a 50 ms deadline must still get its answer
// by its deadline. A fake clock moves the lease from valid to lapsed, so the
// order of events does not hang on the machine's speed.
func TestLapsedLeaseProbeHonoursCallerDeadline(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	clk.ManualSleep = true
	var hang atomic.Bool
	hanging := make(chan struct{}, 1)
	sf := newSF(t, leased.Settings{Distributor: hangingGuard{Distributor: machinetest.NewMemory(nil), hang: &hang, hanging: hanging},
		Instance: inst("a"), Snowflake: snowflake.Settings{Clock: clk}, Lease: machine.Settings{SafeGuard: 1500 * time.Millisecond, Heartbeat: time.Second}, Reservation: -1})
	next(t, sf)
	hang.Store(true)
	// The scheduled heartbeat, due at 1 s, hangs in Guard holding the
	// lease's mutex (until its own 1 s deadline, on the real clock).
	for clk.Sleeps() == 0 {
		time.Sleep(time.Millisecond)
	}
	clk.Advance(time.Second)
	select {
	case <-hanging:
	case <-time.After(time.Minute):
		t.Fatal("the scheduled heartbeat did not call Guard")
	}
	// Past the lease's window: the safe-guard 1.5 s less the 0.3 s margin.
	clk.Advance(350 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := sf.NextID(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("NextID with a 50ms deadline on a lapsed lease and a hanging store: %v; "+
			"want the lapse and the caller's deadline", err)
	}
}

// awayGuard fails every Guard while away is set, as a store that cannot be
// reached.
type awayGuard struct {
	machine.Distributor
	away *atomic.Bool
}

func (d awayGuard) Guard(ctx context.Context, in machine.Instance, st machine.State) error {
	if d.away.Load() {
		return fmt.Errorf("%w: dial tcp 10.0.0.1:3306: connection refused", engine.ErrStoreUnavailable)
	}
	return d.Distributor.Guard(ctx, in, st)
}

// With the store unreachable past the reservation, NextID refuses saying
// that the store cannot be reached and the machine ID may have been taken,
// not that it was lost; once the store answers, IDs flow again.
func TestRefusalWhileStoreAwaySaysSo(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	clk.ManualSleep = true
	var away atomic.Bool
	sf := newSF(t, leased.Settings{Distributor: awayGuard{Distributor: machinetest.NewMemory(nil), away: &away},
		Instance: inst("a"), Snowflake: snowflake.Settings{Clock: clk}})
	next(t, sf)
	away.Store(true)
	clk.Advance(2 * time.Second) // past the default reservation, 1 s
	_, err := sf.NextID(context.Background())
	if !errors.Is(err, engine.ErrStoreUnavailable) || !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("NextID with the store away past the reservation: %v; want ErrStoreUnavailable (and ErrMachineIDLost, a lapse)", err)
	}
	msg := err.Error()
	for _, want := range []string{"the store has not answered", "another instance may have taken the ID", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, engine.ErrMachineIDLost.Error()) {
		t.Errorf("the refusal %q claims the machine ID was lost", msg)
	}
	away.Store(false)
	if id := next(t, sf); id <= 0 || sf.Lost() != 0 {
		t.Fatalf("after the store came back: ID %d, %d leases lost; want an ID on the same lease", id, sf.Lost())
	}
}

// Two leases of one process never share a machine ID, whatever they are
// built on: a second one with the same instance is refused.
func TestSameInstanceTwiceRefused(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	newSF(t, leased.Settings{Distributor: mem, Instance: inst("a")})
	sf, err := leased.New(context.Background(), leased.Settings{Distributor: mem, Instance: inst("a")})
	if err == nil {
		sf.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "of this process") {
		t.Fatalf("second lease of one instance: %v, want ErrInvalidConfig", err)
	}
}

// NextID on a held lease allocates nothing.
func TestNextIDAllocatesNothing(t *testing.T) {
	sf := newSF(t, leased.Settings{Distributor: machinetest.NewMemory(nil), Instance: inst("alloc")})
	ctx := context.Background()
	if n := testing.AllocsPerRun(10_000, func() { _, _ = sf.NextID(ctx) }); n != 0 {
		t.Fatalf("NextID allocates %v times per call", n)
	}
}

// TestNoMachineBits: a layout without machine bits has one machine ID, 0. A
// second instance on a store is refused with ErrMachineIDOverflow (not
// handed machine ID 1 of a default-width lease, which the generator cannot
// hold), and gets 0 once the first one stops.
func TestNoMachineBits(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	layout := snowflake.Layout{Epoch: snowflake.Default.Epoch, TimestampBits: 41, SequenceBits: 22, Unit: time.Millisecond}
	first := newSF(t, leased.Settings{Distributor: mem, Instance: inst("a"), Snowflake: snowflake.Settings{Layout: layout}})
	if _, err := first.NextID(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := leased.New(context.Background(), leased.Settings{Distributor: mem, Instance: inst("b"), Snowflake: snowflake.Settings{Layout: layout}})
	if !errors.Is(err, engine.ErrMachineIDOverflow) || !strings.Contains(err.Error(), "machine ID 0 is its only one") {
		t.Fatalf("second instance: %v; want ErrMachineIDOverflow saying the layout has machine ID 0 only", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	next := newSF(t, leased.Settings{Distributor: mem, Instance: inst("b"), Snowflake: snowflake.Settings{Layout: layout}})
	if next.MachineID() != 0 {
		t.Fatalf("after the first stopped the next got machine ID %d, want 0", next.MachineID())
	}
}

// The lease runs on the generator's time base: after wall steps back of any
// size it goes on reserving time ahead of the IDs issued, and refuses none.
// A restart after the steps (a new time base, from the wall clock) on the
// same machine ID refuses to wait out the hour its predecessor ran ahead;
// an unstable instance takes another machine ID instead.
func TestWallStepsBackWhileLeased(t *testing.T) {
	for _, stable := range []bool{true, false} {
		t.Run(fmt.Sprint("stable=", stable), func(t *testing.T) {
			clk := clocktest.NewFake(time.Now())
			clk.ManualSleep = true
			mem := machinetest.NewMemory(clk)
			set := leased.Settings{Distributor: mem, Snowflake: snowflake.Settings{Clock: clk},
				Instance: machine.Instance{Namespace: "orders", ID: "a", Stable: stable},
				Lease:    machine.Settings{Heartbeat: 500 * time.Millisecond, SkewMargin: -1}, Reservation: time.Second}
			sf, err := leased.New(context.Background(), set)
			if err != nil {
				t.Fatal(err)
			}
			var last int64
			for _, step := range []time.Duration{50 * time.Millisecond, 5 * time.Second, time.Hour} {
				clk.StepWall(-step)
				for range 3 {
					// Past the reservation stored before: only a heartbeat
					// on the generator's time base lets the next ID through.
					clk.Advance(2 * time.Second)
					if err := sf.Lease().Heartbeat(context.Background()); err != nil {
						t.Fatal(err)
					}
					id := next(t, sf)
					if id <= last {
						t.Fatalf("ID %d after %d", id, last)
					}
					last = id
				}
			}
			if err := sf.Close(); err != nil {
				t.Fatal(err)
			}
			issued, _, _, _ := snowflake.Default.Decode(last)
			if behind := issued.Sub(clk.Now()); behind <= time.Hour {
				t.Fatalf("the newest ID is only %v ahead of the wall clock", behind)
			}

			sf, err = leased.New(context.Background(), set)
			if stable {
				if !errors.Is(err, engine.ErrClockBackwards) {
					t.Fatalf("stable restart an hour behind its stored timestamp: %v, want ErrClockBackwards", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			if got, old := sf.MachineID(), machineOf(t, last); got == old {
				t.Fatalf("the restart took machine ID %d, stamped an hour ahead", got)
			}
		})
	}
}
