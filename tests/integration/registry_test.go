package integration

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
)

// TestRegistryOnStore wires registries with idforge.New on each store, as
// instances of one service would: each gets a machine ID of its own from
// the store and draws the "chain" and "segment" kinds from the store's
// sequences; closing one gives its machine ID back for the next instance.
func TestRegistryOnStore(t *testing.T) {
	const ns = "orders"
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s *server) {
		newRegistry := func(id string) *idforge.Registry {
			t.Helper()
			reg, err := idforge.New(ctx, idforge.Settings{Store: s.open(t, ""), Namespace: ns,
				Instance: machine.Instance{Namespace: ns, ID: id},
				Chain:    segment.Settings{Step: 100}, Logger: quiet})
			if err != nil {
				t.Fatalf("New for instance %s: %v", id, err)
			}
			t.Cleanup(func() { reg.Close() })
			return reg
		}
		// snowflakes draws snowflake IDs from reg, checks they increase and
		// share one machine ID, the one the store says id holds, and returns
		// the first, the last and the machine ID.
		snowflakes := func(reg *idforge.Registry, id string) (first, last, machineID int64) {
			t.Helper()
			for i := range 1000 {
				got, err := reg.NextID(ctx, "snowflake", "")
				if err != nil {
					t.Fatalf("instance %s: snowflake: %v", id, err)
				}
				_, m, _, err := snowflake.Default.Decode(got)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case i == 0:
					first, machineID = got, m
				case got <= last:
					t.Fatalf("instance %s: snowflake ID %d after %d", id, got, last)
				case m != machineID:
					t.Fatalf("instance %s: snowflake ID %d decodes to machine %d, earlier ones to %d", id, got, m, machineID)
				}
				last = got
			}
			if stored, ok := s.holder(t, ns, id); !ok || stored != machineID {
				t.Fatalf("instance %s issues as machine %d; the store assigned it %d (held: %v)", id, machineID, stored, ok)
			}
			return first, last, machineID
		}

		a, b := newRegistry("a"), newRegistry("b")
		_, lastA, machineA := snowflakes(a, "a")
		_, _, machineB := snowflakes(b, "b")
		if machineA == machineB {
			t.Fatalf("instances a and b share machine ID %d", machineA)
		}

		for _, kind := range []string{"chain", "segment"} {
			name := kind + "-order" // a fresh sequence per kind
			var all []int64
			for _, reg := range []*idforge.Registry{a, b, a, b} {
				var prev int64
				for range 500 {
					id, err := reg.NextID(ctx, kind, name)
					if err != nil {
						t.Fatalf("%s %q: %v", kind, name, err)
					}
					if id <= prev {
						t.Fatalf("%s %q: ID %d after %d", kind, name, id, prev)
					}
					prev = id
					all = append(all, id)
				}
			}
			if all[0] != 1 {
				t.Errorf("%s %q: first ID %d; want 1, the fresh sequence's first", kind, name, all[0])
			}
			lastMax := s.lastMax(t, name)
			slices.Sort(all)
			if all[len(all)-1] > lastMax {
				t.Errorf("%s %q: ID %d beyond the store's last max %d", kind, name, all[len(all)-1], lastMax)
			}
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("%s %q: ID %d issued twice by a and b", kind, name, all[i])
				}
			}
		}

		if err := a.Close(); err != nil {
			t.Fatalf("closing a: %v", err)
		}
		if _, err := a.NextID(ctx, "snowflake", ""); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("snowflake from a closed registry: %v; want ErrClosed", err)
		}
		if id, ok := s.holder(t, ns, "a"); ok {
			t.Fatalf("instance a still holds machine ID %d after Close", id)
		}
		firstC, _, machineC := snowflakes(newRegistry("c"), "c")
		if machineC != machineA {
			t.Errorf("instance c got machine ID %d; want %d, the one a gave back", machineC, machineA)
		}
		if firstC <= lastA {
			t.Errorf("instance c's first ID %d on machine %d is not after a's last %d on it", firstC, machineC, lastA)
		}
	})
}
