package idforge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
)

func TestNewWithoutStore(t *testing.T) {
	ctx := context.Background()
	reg, err := idforge.New(ctx, idforge.WithMachineDistributor(machine.Manual(7)))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	prev := int64(0)
	for range 10_000 {
		id, err := reg.NextID(ctx, idforge.KindSnowflake, "")
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("id %d after %d: not increasing", id, prev)
		}
		prev = id
	}
	if p, err := snowflake.Default.Decode(prev); err != nil || p.Machine != 7 {
		t.Fatalf("decode %d = %+v, %v; want machine 7", prev, p, err)
	}
	if _, err := reg.NextID(ctx, idforge.KindChain, "order"); !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Fatalf("chain without a store: %v, want ErrUnknownGenerator", err)
	}
}

func TestNewRejectsBadLayout(t *testing.T) {
	bad := snowflake.Default
	bad.SequenceBits = 40
	if _, err := idforge.New(context.Background(), idforge.WithLayout(bad)); !errors.Is(err, engine.ErrInvalidLayout) {
		t.Fatalf("New with a 41+10+40-bit layout: %v, want ErrInvalidLayout", err)
	}
}

// A process that stalls past the safe-guard loses its machine ID to another
// instance; when it wakes it must not issue on that ID again, but move to a
// new one.
func TestStalledInstanceMovesToANewMachineID(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	storeClock := clock.NewFake(start) // the store judges expiry by this one
	storeClock.ManualSleep = true
	aClock := clock.NewFake(start) // instance A's own clock: frozen while it stalls
	aClock.ManualSleep = true
	mem := machinetest.NewMemory(storeClock)

	newReg := func(id string, c clock.Clock) *engine.Registry {
		t.Helper()
		reg, err := idforge.New(ctx,
			idforge.WithNamespace("orders"),
			idforge.WithInstance(machine.Instance{Namespace: "orders", ID: id}),
			idforge.WithMachineDistributor(mem),
			idforge.WithLeaseOptions(machine.WithClock(c), machine.WithSafeGuard(5*time.Second), machine.WithHeartbeat(time.Second)),
			idforge.WithSnowflakeOptions(snowflake.WithClock(c)),
		)
		if err != nil {
			t.Fatalf("New(%s): %v", id, err)
		}
		t.Cleanup(func() { reg.Close() })
		return reg
	}
	machineOf := func(reg *engine.Registry) int64 {
		t.Helper()
		id, err := reg.NextID(ctx, idforge.KindSnowflake, "")
		if err != nil {
			t.Fatal(err)
		}
		p, err := snowflake.Default.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		return p.Machine
	}

	a := newReg("a", aClock)
	if m := machineOf(a); m != 0 {
		t.Fatalf("A's machine = %d, want 0", m)
	}
	// A stalls: the store's clock moves 10 s on, A's does not, so A does
	// not heartbeat and B reclaims A's expired machine ID.
	storeClock.Advance(10 * time.Second)
	b := newReg("b", storeClock)
	if m := machineOf(b); m != 0 {
		t.Fatalf("B's machine = %d, want 0 (A's, reclaimed)", m)
	}
	// A wakes up.
	aClock.Advance(10 * time.Second)
	if m := machineOf(a); m == 0 {
		t.Fatal("A issued on machine 0 after B reclaimed it: duplicates possible")
	}
}

// Both stores plug into New.
var (
	_ idforge.Store = (*sqlstore.Store)(nil)
	_ idforge.Store = (*redisstore.Store)(nil)
)

// Two registries in one process are two instances: they must not share a
// machine ID, or they would issue the same IDs.
func TestTwoRegistriesGetDifferentMachineIDs(t *testing.T) {
	ctx := context.Background()
	mem := machinetest.NewMemory(nil)
	var machines []int64
	for range 2 {
		reg, err := idforge.New(ctx, idforge.WithMachineDistributor(mem))
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		id, err := reg.NextID(ctx, idforge.KindSnowflake, "")
		if err != nil {
			t.Fatal(err)
		}
		p, _ := snowflake.Default.Decode(id)
		machines = append(machines, p.Machine)
	}
	if machines[0] == machines[1] {
		t.Fatalf("both registries issue on machine %d", machines[0])
	}
}

func TestNewRejectsNilStore(t *testing.T) {
	var st *sqlstore.Store
	if _, err := idforge.New(context.Background(), idforge.WithStore(st)); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("WithStore(nil *sqlstore.Store): %v, want ErrInvalidConfig", err)
	}
}

func TestNewRejectsBadChainOptions(t *testing.T) {
	_, err := idforge.New(context.Background(), idforge.WithMachineDistributor(machine.Manual(1)),
		idforge.WithChainOptions(segment.WithStep(0)))
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithStep(0)") {
		t.Fatalf("New with WithStep(0): %v, want ErrInvalidConfig naming WithStep(0)", err)
	}
}
