package machinetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
)

func ExampleNewMemory() {
	ctx := context.Background()
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	mem := machinetest.NewMemory(clk)
	a := machine.Instance{Namespace: "orders", ID: "10.0.0.1:8080"}
	b := machine.Instance{Namespace: "orders", ID: "10.0.0.2:8080"}

	sa, _ := mem.Distribute(ctx, a, 10, 5*time.Minute)
	sb, _ := mem.Distribute(ctx, b, 10, 5*time.Minute)
	fmt.Println("a:", sa.MachineID, "b:", sb.MachineID)

	// a stops and gives its ID back with the last timestamp it used.
	sa.LastTimestamp = clk.Now().UnixMilli()
	_ = mem.Revert(ctx, a, sa)
	c := machine.Instance{Namespace: "orders", ID: "10.0.0.3:8080"}
	sc, _ := mem.Distribute(ctx, c, 10, 5*time.Minute)
	fmt.Println("c:", sc.MachineID, "waits until", time.UnixMilli(sc.LastTimestamp).UTC().Format(time.RFC3339))
	// Output:
	// a: 0 b: 1
	// c: 0 waits until 2026-06-01T00:00:00Z
}
