package proxystore_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/server"
)

// A service without database credentials takes its machine ID and its
// segments from `idforge serve -proxy`, and draws every ID in process.
func Example() {
	// The serve side (here in process, on an in-memory store).
	segs := &memSegments{}
	h, _ := server.New(server.Config{Provider: genreg.New(), Layout: snowflake.Default,
		Proxy: backing{machinetest.NewMemory(clock.System), segs.Segment}})
	ts := httptest.NewServer(h)
	defer ts.Close()

	// The service side.
	ctx := context.Background()
	st, _ := proxystore.New(proxystore.Settings{URL: ts.URL})
	lease, _ := machine.Acquire(ctx, st, machine.Instance{Namespace: "orders", ID: "pod-a"})
	defer lease.Close()
	d, _ := st.Segment("order")
	chain, _ := segment.NewChain(d, segment.WithStep(100))
	defer chain.Close()
	id, _ := chain.NextID(ctx)
	fmt.Println("machine", lease.MachineID(), "first order", id)
	// Output: machine 0 first order 1
}
