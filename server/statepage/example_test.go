package statepage_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/metrics"
	"github.com/idforge/idforge/server/statepage"
)

// The page renders what a metrics collector saw; serve mounts it at /.
func Example() {
	col := metrics.New(metrics.Options{MachineID: func() int64 { return 42 }})
	sf, err := snowflake.New(42)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := col.Generator("snowflake", "", sf).NextID(context.Background()); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", statepage.New(statepage.Config{Collector: col, Namespace: "orders", LayoutName: "default", Layout: snowflake.Default}))
	srv := httptest.NewServer(mux) // a program: http.ListenAndServe(addr, mux)
	defer srv.Close()

	res, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Header.Get("Content-Type"))
	for line := range strings.Lines(string(body)) {
		if strings.Contains(line, `id="machine-id"`) || strings.Contains(line, "<td>snowflake</td>") {
			fmt.Print(strings.TrimLeft(line, " "))
		}
	}
	// Output:
	// 200 OK text/html; charset=utf-8
	// <div class="big" id="machine-id">42</div>
	// <tr><td>snowflake</td><td><span class="muted">(default)</span></td><td>1</td><td>0</td></tr>
}
