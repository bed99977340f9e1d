package idforge_test

import (
	"context"
	"testing"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/segtest"
)

// An outage runs from the first store call that fails to the next one the
// store answers; the registry counts what its generators served and
// refused meanwhile, and keeps the last outage's figures once it ends.
// The outage is driven by draws: the "segment" kind fetches synchronously
// (every second ID with Step 2), and the machine ID comes from elsewhere,
// so no heartbeat calls the store behind the test's back.
func TestOutageFigures(t *testing.T) {
	ctx := context.Background()
	seg := segtest.NewFake(0)
	reg := newReg(t, idforge.Settings{Store: store{Distributor: machinetest.NewMemory(nil), seg: seg},
		Machine: machine.Manual(3), StateDir: "off", Chain: segment.Settings{Step: 2}})
	sf, err := reg.Generator(ctx, "snowflake", "")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := reg.Generator(ctx, "segment", "invoice")
	if err != nil {
		t.Fatal(err)
	}
	draw := func(g engine.Generator, n int, wantErr bool) {
		t.Helper()
		for range n {
			if _, err := g.NextID(ctx); (err != nil) != wantErr {
				t.Fatalf("NextID: %v, want an error: %v", err, wantErr)
			}
		}
	}
	batch := func(g engine.Generator, n int) (int, error) {
		return g.(interface {
			NextIDs(context.Context, []int64) (int, error)
		}).NextIDs(ctx, make([]int64, n))
	}
	want := func(o idforge.Outage, name string, served, refused map[string]int64) {
		t.Helper()
		for kind, n := range served {
			if o.Served[kind] != n {
				t.Errorf("%s: served %d %s IDs, want %d (%v)", name, o.Served[kind], kind, n, o.Served)
			}
		}
		for kind, n := range refused {
			if o.Refused[kind] != n {
				t.Errorf("%s: refused %d %s IDs, want %d (%v)", name, o.Refused[kind], kind, n, o.Refused)
			}
		}
	}

	draw(sg, 1, false) // fetches 1..2
	draw(sf, 2, false)
	if d := reg.Stats(); !d.Outage.Start.IsZero() || !d.LastOutage.Start.IsZero() {
		t.Fatalf("an outage before the store failed: %+v, last %+v", d.Outage, d.LastOutage)
	}

	seg.SetDown(true)
	draw(sg, 1, false) // 2, held: the store is not asked, no outage yet
	if d := reg.Stats(); !d.Outage.Start.IsZero() {
		t.Fatalf("an outage before a store call failed: %+v", d.Outage)
	}
	draw(sg, 1, true) // the fetch fails: the outage starts
	draw(sf, 3, false)
	if n, err := batch(sg, 5); n != 0 || err == nil {
		t.Fatalf("NextIDs with the store down = %d, %v", n, err)
	}
	if n, err := batch(sf, 4); n != 4 || err != nil {
		t.Fatalf("snowflake NextIDs with the store down = %d, %v", n, err)
	}
	s := reg.Stats()
	d := s
	if d.Outage.Start.IsZero() || !d.Outage.End.IsZero() {
		t.Fatalf("current outage %+v", d.Outage)
	}
	want(d.Outage, "current outage", map[string]int64{"snowflake": 7, "segment": 0}, map[string]int64{"snowflake": 0, "segment": 6})
	if served, refused := total(d.Outage.Served), total(d.Outage.Refused); served != 7 || refused != 6 {
		t.Errorf("current outage totals: served %d, refused %d; want 7, 6", served, refused)
	}
	if !d.LastOutage.Start.IsZero() {
		t.Errorf("a last outage before any ended: %+v", d.LastOutage)
	}
	for _, g := range s.Generators {
		if g.Kind == "segment" && (g.Issued != 2 || g.Errors["store_unavailable"] != 2) {
			t.Errorf("segment generator issued %d, errors %v; want 2 issued, 2 store_unavailable (refused draws are not issued)", g.Issued, g.Errors)
		}
	}

	seg.SetDown(false)
	draw(sg, 1, false) // the store answers: the outage ends before this ID is counted
	draw(sf, 1, false)
	s = reg.Stats()
	d = s
	if !d.Outage.Start.IsZero() {
		t.Fatalf("outage goes on after the store answered: %+v", d.Outage)
	}
	last := d.LastOutage
	if last.Start.IsZero() || last.End.Before(last.Start) {
		t.Fatalf("last outage %+v", last)
	}
	want(last, "last outage", map[string]int64{"snowflake": 7, "segment": 0}, map[string]int64{"segment": 6})

	// A second outage leaves the last one's figures until it ends itself.
	draw(sg, 1, false) // the rest of the segment
	seg.SetDown(true)
	draw(sg, 1, true)
	d = reg.Stats()
	want(d.Outage, "second outage", map[string]int64{"snowflake": 0, "segment": 0}, map[string]int64{"segment": 1})
	if !d.LastOutage.Start.Equal(last.Start) || !d.LastOutage.End.Equal(last.End) {
		t.Errorf("last outage changed while the second goes on: %+v, was %+v", d.LastOutage, last)
	}
	want(d.LastOutage, "last outage", map[string]int64{"snowflake": 7}, map[string]int64{"segment": 6})
	seg.SetDown(false)
	draw(sg, 1, false)
	want(reg.Stats().LastOutage, "second outage ended", map[string]int64{"snowflake": 0}, map[string]int64{"segment": 1})
}

// total sums IDs over the kinds.
func total(by map[string]int64) (n int64) {
	for _, v := range by {
		n += v
	}
	return n
}
