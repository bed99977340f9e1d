package idforge_test

import (
	"context"
	"errors"
	"strings"
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

// Without a store the machine ID comes from machine.Default() (Manual(0),
// IDFORGE_MACHINE_ID or the StatefulSet ordinal), which ignores the instance:
// every registry of the process would get the same machine ID (e.g.
// idforge.Default() used by the GORM plugin plus an idforge.New() for sqlx)
// and their IDs would collide. The second one must refuse to start instead.
func TestTwoStorelessRegistriesNeverShareAMachineID(t *testing.T) {
	t.Setenv(machine.MachineIDEnv, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	ctx := context.Background()
	clk := clock.NewFake(time.Now()) // both generators in the same millisecond
	first, err := idforge.New(ctx, idforge.WithSnowflakeOptions(snowflake.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	a, err := first.NextID(ctx, idforge.KindSnowflake, "")
	if err != nil {
		t.Fatal(err)
	}
	// The second registry either gets another machine ID or refuses to
	// start; it must never issue on the first one's.
	second, err := idforge.New(ctx, idforge.WithSnowflakeOptions(snowflake.WithClock(clk)))
	if err != nil {
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "of this process holds it") {
			t.Fatalf("second storeless registry: %v, want a clear ErrInvalidConfig", err)
		}
	} else {
		defer second.Close()
		b, err := second.NextID(ctx, idforge.KindSnowflake, "")
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			t.Fatalf("two registries of one process issued the same ID %d", a)
		}
	}
	// Once the first is closed, its machine ID is free for a new registry.
	first.Close()
	third, err := idforge.New(ctx, idforge.WithSnowflakeOptions(snowflake.WithClock(clk)))
	if err != nil {
		t.Fatalf("New after the first registry closed: %v", err)
	}
	third.Close()
}

// hangingGuard is a store whose Guard stops answering (a dropped
// connection) once hang is set: it returns only when its ctx ends.
type hangingGuard struct {
	*machinetest.Memory
	hang *atomic.Bool
}

func (d hangingGuard) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if d.hang.Load() {
		<-ctx.Done()
		return engine.ErrStoreUnavailable
	}
	return d.Memory.Guard(ctx, inst, st)
}

// When the lease has lapsed, NextID probes the store with a Heartbeat, which
// first takes the lease's mutex: the scheduled heartbeat may hold it for its
// whole Guard call (bounded by the heartbeat interval, a minute by default).
// A caller with a 50 ms deadline must still get its answer by its deadline.
func TestLapsedLeaseProbeHonoursCallerDeadline(t *testing.T) {
	ctx := context.Background()
	var hang atomic.Bool
	dist := hangingGuard{Memory: machinetest.NewMemory(nil), hang: &hang}
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
	_, err = reg.NextID(cctx, idforge.KindSnowflake, "")
	// The caller's deadline ends the wait: the error says so, rather than
	// coming back after the scheduled heartbeat gave up on the store.
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("NextID with a 50ms deadline on a lapsed lease and a hanging store: %v; "+
			"want the lapse and the caller's deadline", err)
	}
}
