package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
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
