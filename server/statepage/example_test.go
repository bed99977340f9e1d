package statepage_test

import (
	"net/http"

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/metrics"
	"github.com/idforge/idforge/server/statepage"
)

// The page renders what a metrics collector saw; serve mounts it at /.
func Example() {
	col := metrics.New(metrics.Options{Layout: snowflake.Default})
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", statepage.New(statepage.Config{Collector: col, Namespace: "orders", LayoutName: "default", Layout: snowflake.Default}))
	_ = mux // http.ListenAndServe("127.0.0.1:8080", mux)
	// Output:
}
