package sharding

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
)

// tablesRouter is the default-rule router over d databases × t tables.
func tablesRouter(t *testing.T, d, n int) *Router {
	t.Helper()
	cfg := Mod{Tables: fmt.Sprintf("t_{0..%d}", n-1)}
	if d > 1 {
		cfg.Databases = fmt.Sprintf("ds_{0..%d}", d-1)
	}
	return mustMod(t, cfg)
}

// An owner-keyed ID routes like its owner, carries the owner's residue in
// its low part and the value above it, for every router and residue count
// that is a multiple of its shards, the course rule's included.
func TestOwnerIDRoutesLikeOwner(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	routers := map[string]*Router{"course": courseRouter(t)}
	for _, dt := range [][2]int{{1, 2}, {1, 3}, {2, 2}, {1, 5}, {2, 3}, {2, 4}, {3, 4}, {4, 4}, {32, 32}} {
		routers[fmt.Sprintf("%d×%d", dt[0], dt[1])] = tablesRouter(t, dt[0], dt[1])
	}
	for name, r := range routers {
		shards, _ := r.Shards()
		for _, k := range []int{1, 3} {
			m := len(shards) * k
			most := int64(1<<62) / int64(m)
			for i := range 5000 {
				owner := 1 + rng.Int64N(1<<40)
				if i%2 == 0 {
					owner = 1 + int64(i)
				}
				value := 1 + rng.Int64N(most)
				id, err := r.OwnerID(owner, value, m)
				if err != nil {
					t.Fatalf("%s, %d residues: OwnerID(%d, %d): %v", name, m, owner, value, err)
				}
				if id/int64(m) != value || id%int64(m) != owner%int64(m) {
					t.Fatalf("%s: id %d is not value %d × %d + owner %d mod %d", name, id, value, m, owner, m)
				}
				got, _ := r.Route(id)
				want, _ := r.Route(owner)
				if got != want {
					t.Fatalf("%s, %d residues: id %d routes to %s, owner %d to %s", name, m, id, got, owner, want)
				}
			}
		}
	}
}

// Residues that are a multiple of every shard count keep the IDs stored
// routing with their owners after shards are added; a count that does not
// divide them does not.
func TestOwnerIDAfterAddingShards(t *testing.T) {
	const residues = 720
	rng := rand.New(rand.NewPCG(5, 6))
	before := tablesRouter(t, 2, 2)
	type row struct{ owner, id int64 }
	var rows []row
	for range 20000 {
		owner := 1 + rng.Int64N(1<<40)
		id, err := before.OwnerID(owner, 1+rng.Int64N(1<<53), residues)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row{owner, id})
	}
	for _, dt := range [][2]int{{2, 3}, {3, 3}, {2, 5}, {4, 4}, {3, 5}, {2, 8}, {4, 6}, {2, 7}} {
		after := tablesRouter(t, dt[0], dt[1])
		divides := residues%(dt[0]*dt[1]) == 0
		moved := 0
		for _, r := range rows {
			got, _ := after.Route(r.id)
			want, _ := after.Route(r.owner)
			if got != want {
				moved++
			}
		}
		switch {
		case divides && moved > 0:
			t.Errorf("%d×%d shards divide %d residues, yet %d IDs of 20,000 no longer route with their owners", dt[0], dt[1], residues, moved)
		case !divides && moved == 0:
			t.Errorf("%d×%d shards do not divide %d residues, yet every ID still routes with its owner", dt[0], dt[1], residues)
		}
		t.Logf("%d×%d shards: %d of 20,000 IDs route away from their owners", dt[0], dt[1], moved)
	}
}

// Owner-keyed IDs drawn by eight goroutines from one generator are unique;
// the same draws with their low bits overwritten by the owner's residue
// (the post-hoc rewrite) collide.
func TestOwnerIDUnique(t *testing.T) {
	g, err := snowflake.New(3, snowflake.Settings{Layout: snowflake.JSSafe, Clock: clocktest.NewFake(start)})
	if err != nil {
		t.Fatal(err)
	}
	r := tablesRouter(t, 2, 8)
	const workers, each, residues = 8, 25000, 16
	type draw struct{ value, owner int64 }
	draws := make([][]draw, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range each {
				v, err := g.NextID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				draws[w] = append(draws[w], draw{v, 1 + rng.Int64N(1000)})
			}
		})
	}
	wg.Wait()
	composed := map[int64]bool{}
	rewritten := map[int64]bool{}
	collisions := 0
	for _, ds := range draws {
		for _, d := range ds {
			id, err := r.OwnerID(d.owner, d.value, residues)
			if err != nil {
				t.Fatal(err)
			}
			if composed[id] {
				t.Fatalf("owner-keyed id %d drawn twice", id)
			}
			composed[id] = true
			low := d.value&^(residues-1) | d.owner%residues
			if rewritten[low] {
				collisions++
			}
			rewritten[low] = true
		}
	}
	if len(composed) != workers*each {
		t.Fatalf("%d IDs, want %d", len(composed), workers*each)
	}
	if collisions == 0 {
		t.Fatal("the control saw no collision: overwriting the low bits of consecutive draws must collide")
	}
	t.Logf("%d owner-keyed IDs unique; the low-bit rewrite of the same draws collided %d times", len(composed), collisions)
}

// Owner-keyed IDs spread over the shards as their owners' rows do: owners
// drawn from idforge's snowflake at random arrivals fill the shards evenly
// (max/min ≤ 1.05, as plain IDs do), and each shard holds exactly the IDs
// of its owners' rows, so the layout adds no skew of its own. How even the
// IDs are then depends on how many rows each owner has: it is logged, not
// asserted (owners with 1 to 3 rows at random here).
func TestOwnerIDEvenness(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	values, _ := generate(t, snowflake.JSSafe, 1, traffic{"saturation", 0}, nil)
	value := values[0]
	all, _ := generate(t, snowflake.Default, 102400, traffic{"10/s", 10}, rng)
	for _, n := range shardCounts {
		ownerIDs := all[:40000]
		if n == 1024 {
			ownerIDs = all
		}
		r := tablesRouter(t, 1, int(n))
		residues := int(n) * (1024 / int(n)) // the most a JSSafe value leaves room for
		byOwner := make([]int, n)
		byOwnerRows := make([]int, n)
		byID := make([]int, n)
		index := func(s Shard) int {
			var k int
			_, _ = fmt.Sscanf(s.TableName, "t_%d", &k)
			return k
		}
		for _, owner := range ownerIDs {
			s, err := r.Route(owner)
			if err != nil {
				t.Fatal(err)
			}
			byOwner[index(s)]++
			rows := 1 + rng.IntN(3)
			byOwnerRows[index(s)] += rows
			for range rows {
				value++
				id, err := r.OwnerID(owner, value, residues)
				if err != nil {
					t.Fatal(err)
				}
				at, _ := r.Route(id)
				byID[index(at)]++
			}
		}
		so, si := MeasureSlice(byOwner), MeasureSlice(byID)
		t.Logf("N=%-4d %d residues: owners max/min %.3f p %.3g; IDs max/min %.3f p %.3g (%d IDs)",
			n, residues, so.MaxMinRatio, so.PValue, si.MaxMinRatio, si.PValue, si.Total)
		if so.MaxMinRatio > 1.05 {
			t.Errorf("N=%d: owners max/min %.3f > 1.05", n, so.MaxMinRatio)
		}
		for i := range byID {
			if byID[i] != byOwnerRows[i] {
				t.Fatalf("N=%d: shard %d holds %d IDs, its owners have %d rows", n, i, byID[i], byOwnerRows[i])
			}
		}
	}
}

func TestOwnerIDErrors(t *testing.T) {
	r := courseRouter(t)
	interval, err := NewInterval(Interval{Layout: snowflake.Default, Table: "order_{200601}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		r            *Router
		owner, value int64
		residues     int
		want         error
		says         string
	}{
		{"owner 0", r, 0, 1, 4, engine.ErrInvalidID, "owner 0"},
		{"value 0", r, 1, 0, 4, engine.ErrInvalidID, "value 0"},
		{"a 63-bit value", r, 1, 1 << 62, 4, engine.ErrInvalidID, "at most 61 bits"},
		{"a 54-bit value, 1024 residues", r, 1, 1 << 53, 1024, engine.ErrInvalidID, "at most 53 bits"},
		{"no residues", r, 1, 1, 0, engine.ErrInvalidConfig, "0 residues"},
		{"residues not a multiple of the period", r, 1, 1, 3, engine.ErrInvalidConfig, "routes to"},
		{"interval router", interval, 1, 1, 4, engine.ErrInvalidConfig, "Mod router"},
		{"zero router", &Router{}, 1, 1, 4, engine.ErrInvalidConfig, "zero Router"},
	} {
		_, err := c.r.OwnerID(c.owner, c.value, c.residues)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	if id, err := r.OwnerID(1, (1<<53)-1, 1024); err != nil || id != ((1<<53)-1)*1024+1 {
		t.Errorf("the largest 53-bit value with 1024 residues: %d, %v", id, err)
	}
}
