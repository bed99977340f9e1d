package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/segtest"
	"github.com/idforge/idforge/metrics"
)

// The collector reports what the registry counted: IDs issued per
// generator and the machine ID, under the chosen namespace.
func TestCollectorReadsStats(t *testing.T) {
	ctx := context.Background()
	reg, err := idforge.New(ctx, idforge.Settings{Machine: machine.Manual(3), StateDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	g, err := reg.Generator(ctx, "snowflake", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := g.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pr := prometheus.NewPedanticRegistry()
	pr.MustRegister(metrics.New(reg))
	want := `
# HELP idforge_ids_issued_total IDs handed out.
# TYPE idforge_ids_issued_total counter
idforge_ids_issued_total{kind="snowflake",name=""} 5
idforge_ids_issued_total{kind="uuidv7",name=""} 0
# HELP idforge_lease_machine_id The machine ID held, -1 when none.
# TYPE idforge_lease_machine_id gauge
idforge_lease_machine_id 3
`
	if err := testutil.GatherAndCompare(pr, strings.NewReader(want), "idforge_ids_issued_total", "idforge_lease_machine_id"); err != nil {
		t.Error(err)
	}
}

// store is a Store whose sequences draw from one in-memory fake.
type store struct {
	machine.Distributor
	seg *segtest.Fake
}

func (s store) Segment(string, ...engine.Floor) (segment.Distributor, error) { return s.seg, nil }

// The outage series: the current outage's at 0 while the store answers,
// then what was served and refused while it was down, and, once it
// answers again, the last outage's.
func TestCollectorReportsOutages(t *testing.T) {
	ctx := context.Background()
	seg := segtest.NewFake(0)
	reg, err := idforge.New(ctx, idforge.Settings{Store: store{Distributor: machinetest.NewMemory(nil), seg: seg},
		Machine: machine.Manual(3), StateDir: "off", Chain: segment.Settings{Step: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	draw := func(kind string, n int, wantErr bool) {
		t.Helper()
		for range n {
			if _, err := reg.NextID(ctx, kind, ""); (err != nil) != wantErr {
				t.Fatalf("%s: %v, want an error: %v", kind, err, wantErr)
			}
		}
	}
	pr := prometheus.NewPedanticRegistry()
	pr.MustRegister(metrics.New(reg))
	compare := func(want string) {
		t.Helper()
		const head = `
# HELP idforge_outage_ids_refused IDs asked for and refused during the current store outage (0 without one) or the last one that ended.
# TYPE idforge_outage_ids_refused gauge
`
		if err := testutil.GatherAndCompare(pr, strings.NewReader(head+want), "idforge_outage_ids_refused"); err != nil {
			t.Error(err)
		}
	}
	draw("segment", 1, false)
	compare(`
idforge_outage_ids_refused{kind="segment",outage="current"} 0
idforge_outage_ids_refused{kind="snowflake",outage="current"} 0
idforge_outage_ids_refused{kind="uuidv7",outage="current"} 0
`)
	if n, err := testutil.GatherAndCount(pr, "idforge_outage_seconds", "idforge_outage_end_timestamp_seconds"); err != nil || n != 1 {
		t.Errorf("outage seconds and end series without an outage: %d, %v; want the current outage's seconds alone", n, err)
	}

	seg.SetDown(true)
	draw("segment", 3, true)
	draw("snowflake", 2, false)
	compare(`
idforge_outage_ids_refused{kind="segment",outage="current"} 3
idforge_outage_ids_refused{kind="snowflake",outage="current"} 0
idforge_outage_ids_refused{kind="uuidv7",outage="current"} 0
`)

	seg.SetDown(false)
	draw("segment", 1, false)
	compare(`
idforge_outage_ids_refused{kind="segment",outage="current"} 0
idforge_outage_ids_refused{kind="snowflake",outage="current"} 0
idforge_outage_ids_refused{kind="uuidv7",outage="current"} 0
idforge_outage_ids_refused{kind="segment",outage="last"} 3
idforge_outage_ids_refused{kind="snowflake",outage="last"} 0
idforge_outage_ids_refused{kind="uuidv7",outage="last"} 0
`)
	want := `
# HELP idforge_outage_ids_served IDs handed out during the current store outage (0 without one) or the last one that ended.
# TYPE idforge_outage_ids_served gauge
idforge_outage_ids_served{kind="segment",outage="current"} 0
idforge_outage_ids_served{kind="snowflake",outage="current"} 0
idforge_outage_ids_served{kind="uuidv7",outage="current"} 0
idforge_outage_ids_served{kind="segment",outage="last"} 0
idforge_outage_ids_served{kind="snowflake",outage="last"} 2
idforge_outage_ids_served{kind="uuidv7",outage="last"} 0
`
	if err := testutil.GatherAndCompare(pr, strings.NewReader(want), "idforge_outage_ids_served"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(pr, "idforge_outage_seconds", "idforge_outage_end_timestamp_seconds"); err != nil || n != 3 {
		t.Errorf("outage seconds and end series after an outage: %d, %v; want current and last seconds, last end", n, err)
	}
}
