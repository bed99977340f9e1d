package leased_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/internal/leased"
)

// An instance leases a machine ID from a shared store; its snowflake
// generator asks the lease before every ID. After a stall past the
// safe-guard the lease refuses at once, before any heartbeat could run.
func Example() {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	clk.ManualSleep = true
	store := machinetest.NewMemory(clk) // engine/sqlstore or engine/redisstore in production

	inst := machine.Instance{Namespace: "orders", ID: "10.0.0.7:8080"}
	lease, err := leased.Acquire(ctx, store, inst, leased.LeaseSettings{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Close()
	fmt.Println("machine ID:", lease.MachineID())
	fmt.Println("issue now:", lease.Check(clk.Now().UnixMilli()))

	sixMinutesLater := clk.Now().Add(6 * time.Minute).UnixMilli()
	err = lease.Check(sixMinutesLater)
	fmt.Println("issue after a 6-minute stall:", errors.Is(err, engine.ErrMachineIDLost))
	// Output:
	// machine ID: 0
	// issue now: <nil>
	// issue after a 6-minute stall: true
}

// A stable instance restarts after the clock went back: the state file
// remembers the last timestamp its previous run used.
func ExampleLocalState() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idforge-machine")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	d := leased.LocalState(dir, machine.Manual(3), nil)
	inst := machine.Instance{Namespace: "billing", ID: "billing-3", Stable: true}

	// The previous run stopped at 12:00 and reverted its ID.
	last := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	_ = d.Revert(ctx, inst, machine.State{MachineID: 3, LastTimestamp: last.UnixMilli()})

	st, err := d.Distribute(ctx, inst, 10, 5*time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("machine ID", st.MachineID, "waits until", time.UnixMilli(st.LastTimestamp).UTC().Format(time.RFC3339))
	// Output:
	// machine ID 3 waits until 2026-06-01T12:00:00Z
}
