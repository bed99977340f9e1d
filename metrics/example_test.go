package metrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/metrics"
)

// A collector counts the IDs a provider hands out; register it in your own
// Prometheus registry.
func Example() {
	col := metrics.New(metrics.Options{})
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(col)

	reg := engine.NewRegistry()
	g, _ := snowflake.New(1)
	reg.Register("snowflake", "", g)
	p := col.Provider(reg) // hand p to the GORM plugin, the sqlx helper...

	sf, _ := p.Generator(context.Background(), "snowflake", "")
	for range 3 {
		sf.NextID(context.Background())
	}
	for _, gen := range col.Snapshot().Generators {
		fmt.Println(gen.Kind, gen.Issued)
	}
	// Output: snowflake 3
}
