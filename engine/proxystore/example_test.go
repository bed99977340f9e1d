package proxystore_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/server"
)

// A service without database credentials takes its machine ID and its
// segments from `idforge serve -proxy`, and draws every ID in process.
func Example() {
	// The serve side (here in process, on an in-memory store).
	reg, _ := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(1), StateDir: "off"})
	defer reg.Close()
	h, _ := server.New(server.Settings{Registry: reg, Layout: snowflake.Default,
		Proxy: backing{machinetest.NewMemory(clock.System), &memSegments{}}})
	ts := httptest.NewServer(h)
	defer ts.Close()

	// The service side.
	ctx := context.Background()
	st, _ := proxystore.New(proxystore.Settings{URL: ts.URL})
	inst := machine.Instance{Namespace: "orders", ID: "pod-a"}
	held, _ := st.Distribute(ctx, inst, 10, 5*time.Minute) // idforge.New leases it with Settings.Store: st
	defer st.Revert(ctx, inst, held)
	d, _ := st.Segment("order")
	maxID, _ := d.NextMaxID(ctx, 100) // the range (maxID-100, maxID]; idforge.New's chains draw it
	fmt.Println("machine", held.MachineID, "first order", maxID-100+1)
	// Output: machine 0 first order 1
}

// backing is a server-side store: machine IDs from a distributor, segments
// from memory.
type backing struct {
	machine.Distributor
	segs *memSegments
}

func (b backing) Segment(name string, _ ...engine.Floor) (segment.Distributor, error) {
	return b.segs.segment(name), nil
}

// memSegments keeps one counter per sequence name.
type memSegments struct {
	mu   sync.Mutex
	seqs map[string]*atomic.Int64
}

func (m *memSegments) segment(name string) segment.Distributor {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seqs == nil {
		m.seqs = map[string]*atomic.Int64{}
	}
	n, ok := m.seqs[name]
	if !ok {
		n = new(atomic.Int64)
		m.seqs[name] = n
	}
	return distFunc(func(_ context.Context, step int64) (int64, error) { return n.Add(step), nil })
}

// distFunc adapts a function to segment.Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
