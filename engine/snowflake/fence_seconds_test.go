package snowflake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/leased"
)

// guardDown is a store whose Guard is down for one instance (its
// heartbeats fail transiently), so that instance's lease lapses on schedule.
type guardDown struct {
	machine.Distributor
	down string
}

func (d guardDown) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if inst.ID == d.down {
		return engine.ErrStoreUnavailable
	}
	return d.Distributor.Guard(ctx, inst, st)
}

// A second tick lasts 999 ms past its start, so the generator fences it by
// its last millisecond. Lease's proof (Check refuses from s + safeGuard -
// margin, a successor issues only from s + safeGuard) holds per millisecond;
// fencing by the tick's start would let the predecessor's last approved tick
// and the successor's first be the same second on the same machine ID, with
// a skew margin under one second: duplicate IDs with one shared clock.
func TestSecondTickFenceLeavesNoOverlapWithSuccessor(t *testing.T) {
	x := time.Now().Truncate(time.Second).Add(-time.Hour)
	clk := clocktest.NewFake(x.Add(500 * time.Millisecond))
	clk.ManualSleep = true
	store := guardDown{Distributor: machinetest.NewMemory(clk), down: "a"}
	opts := leased.LeaseSettings{Lease: machine.Settings{SafeGuard: 10 * time.Second, SkewMargin: -1, Heartbeat: 5 * time.Second}, Clock: clk, Reservation: -1}
	ctx := context.Background()
	newGen := func(l *leased.Lease) *snowflake.Generator {
		g, err := snowflake.Resume(l.MachineID(), snowflake.Settings{Layout: snowflake.Seconds, Clock: clk},
			l.State().LastTimestamp, l.Check)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	leaseA, err := leased.Acquire(ctx, store, machine.Instance{Namespace: "ns", ID: "a"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer leaseA.Close()
	genA := newGen(leaseA) // acquired at x+0.5s: valid until x+10.5s

	clk.Advance(x.Add(10400 * time.Millisecond).Sub(clk.Now())) // within A's lease, but not the whole second x+10
	idA, errA := genA.NextID(ctx)
	if errA != nil && !errors.Is(errA, engine.ErrMachineIDLost) {
		t.Fatal(errA)
	}

	clk.Advance(x.Add(10500 * time.Millisecond).Sub(clk.Now())) // A silent for the safe-guard: reclaimable
	leaseB, err := leased.Acquire(ctx, store, machine.Instance{Namespace: "ns", ID: "b"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer leaseB.Close()
	if leaseB.MachineID() != leaseA.MachineID() {
		t.Skipf("B got machine %d, A holds %d", leaseB.MachineID(), leaseA.MachineID())
	}
	genB := newGen(leaseB)
	idB, err := genB.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A may still issue for a tick its fence approves.
	idA2, errA2 := genA.NextID(ctx)
	if errA2 == nil && idA2 == idB {
		t.Fatalf("A issued %d after B's first ID %d on the same machine ID", idA2, idB)
	}
	if errA == nil && idA == idB {
		ta, _, sa, _ := snowflake.Seconds.Decode(idA)
		tb, _, sb, _ := snowflake.Seconds.Decode(idB)
		t.Fatalf("predecessor A issued %d (%v seq %d) under its lease, successor B issued %d (%v seq %d) on the same machine ID; A's next: %d, %v",
			idA, ta, sa, idB, tb, sb, idA2, errA2)
	}
}
