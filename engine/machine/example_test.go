package machine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
)

// Two instances share a store: each gets its own machine ID, and a holding
// is proved by its secret, so a stale holder cannot heartbeat once its ID
// was reclaimed.
func Example() {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	var store machine.Distributor = machinetest.NewMemory(clk) // engine/sqlstore or engine/redisstore in production

	a := machine.Instance{Namespace: "orders", ID: "10.0.0.7:8080"}
	b := machine.Instance{Namespace: "orders", ID: "10.0.0.8:8080"}
	stA, _ := store.Distribute(ctx, a, 10, 5*time.Minute)
	stB, _ := store.Distribute(ctx, b, 10, 5*time.Minute)
	fmt.Println(a.ID, "has", stA.MachineID, "and", b.ID, "has", stB.MachineID)

	// a falls silent past the safe-guard; a third instance reclaims its ID.
	clk.Advance(6 * time.Minute)
	c := machine.Instance{Namespace: "orders", ID: "10.0.0.9:8080"}
	stC, _ := store.Distribute(ctx, c, 10, 5*time.Minute)
	fmt.Println(c.ID, "has", stC.MachineID)
	err := store.Guard(ctx, a, stA)
	fmt.Println("a's heartbeat:", errors.Is(err, engine.ErrMachineIDLost))
	// Output:
	// 10.0.0.7:8080 has 0 and 10.0.0.8:8080 has 1
	// 10.0.0.9:8080 has 0
	// a's heartbeat: true
}

// A fixed machine ID, for an operator who numbers the instances.
func ExampleManual() {
	st, err := machine.Manual(3).Distribute(context.Background(),
		machine.Instance{Namespace: "billing", ID: "billing-3", Stable: true}, 10, 5*time.Minute)
	fmt.Println(st.MachineID, err)
	// Output:
	// 3 <nil>
}
