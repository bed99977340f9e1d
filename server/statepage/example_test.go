package statepage_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/server/statepage"
)

// The page renders what the registry counted; serve mounts it at /.
func Example() {
	ctx := context.Background()
	reg, err := idforge.New(ctx, idforge.Settings{Machine: machine.Manual(42), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.NextID(ctx, engine.KindSnowflake, ""); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", statepage.New(statepage.Config{Registry: reg, Namespace: "orders", LayoutName: "default", Layout: snowflake.Default}))
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
