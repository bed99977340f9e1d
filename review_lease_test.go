package idforge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/snowflake"
)

// README: "every idforge.New is an instance of its own with its own machine
// ID"; WithInstance's doc: "a new unstable instance for every New, so two
// registries never share a machine ID". Without a store the machine ID comes
// from machine.Default() (Manual(0), IDFORGE_MACHINE_ID or the StatefulSet
// ordinal), which ignores the instance: every registry of the process gets
// the same machine ID (e.g. idforge.Default() used by the GORM plugin plus an
// idforge.New() for sqlx), and their IDs collide.
func TestReviewTwoStorelessRegistriesShareMachineID(t *testing.T) {
	t.Setenv(machine.MachineIDEnv, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	ctx := context.Background()
	clk := clock.NewFake(time.Now()) // both generators in the same millisecond
	var ids []int64
	for range 2 {
		reg, err := idforge.New(ctx, idforge.WithSnowflakeOptions(snowflake.WithClock(clk)))
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		id, err := reg.NextID(ctx, idforge.KindSnowflake, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] {
		p, _ := snowflake.Default.Decode(ids[0])
		t.Fatalf("two registries of one process issued the same ID %d (%+v)", ids[0], p)
	}
}

// reviewHangingGuard is a store whose Guard stops answering (a dropped
// connection) once hang is set: it returns only when its ctx ends.
type reviewHangingGuard struct {
	*machinetest.Memory
	hang *atomic.Bool
}

func (d reviewHangingGuard) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if d.hang.Load() {
		<-ctx.Done()
		return engine.ErrStoreUnavailable
	}
	return d.Memory.Guard(ctx, inst, st)
}

// When the lease has lapsed, NextID probes the store with a Heartbeat bounded
// by min(ctx, probeTimeout) — but Heartbeat first takes the lease's mutex,
// which the scheduled heartbeat holds for its whole Guard call (bounded by
// the heartbeat interval, one minute by default). A caller with a 50 ms
// deadline waits for that Guard to time out.
func TestReviewLapsedLeaseProbeIgnoresCallerDeadline(t *testing.T) {
	ctx := context.Background()
	var hang atomic.Bool
	dist := reviewHangingGuard{Memory: machinetest.NewMemory(nil), hang: &hang}
	reg, err := idforge.New(ctx, idforge.WithMachineDistributor(dist),
		idforge.WithLeaseOptions(machine.WithSafeGuard(1500*time.Millisecond), machine.WithHeartbeat(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	began := time.Now()
	if _, err := reg.NextID(ctx, idforge.KindSnowflake, ""); err != nil {
		t.Fatal(err)
	}
	hang.Store(true)
	// The lease is valid for 1.2 s (safe-guard 1.5 s less the 0.3 s margin);
	// the scheduled heartbeat starts at 1 s and hangs until 2 s.
	time.Sleep(time.Until(began.Add(1350 * time.Millisecond)))
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = reg.NextID(cctx, idforge.KindSnowflake, "")
	took := time.Since(t0)
	if err == nil {
		t.Fatal("NextID on a lapsed lease with a hanging store succeeded")
	}
	if took > 300*time.Millisecond {
		t.Fatalf("NextID with a 50ms deadline took %v (err: %v)", took.Round(time.Millisecond), err)
	}
}
