package statepage_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/metrics"
	"github.com/idforge/idforge/server/statepage"
)

func TestPageShowsMachineAndChains(t *testing.T) {
	ctx := context.Background()
	col := metrics.New(metrics.Options{MachineID: func() int64 { return 42 }})
	h := statepage.New(statepage.Config{Collector: col, Namespace: "orders<b>", LayoutName: "default", Store: "sqlite x", Layout: snowflake.Default})

	body := get(t, h)
	for _, want := range []string{`id="machine-id">42<`, `id="no-chains"`, "orders&lt;b&gt;", "No segment fetched yet", `http-equiv="refresh"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	fake := segmenttest.NewFake()
	chain, err := segment.NewChain(fake, segment.WithStep(50))
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	g := col.Generator("chain", "order", chain)
	for range 120 {
		if _, err := g.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sf, _ := snowflake.New(42)
	col.Generator("snowflake", "", sf).NextID(ctx)
	col.Generator("chain", "down", engine.GeneratorFunc(func(context.Context) (int64, error) { return 0, engine.ErrStoreUnavailable })).NextID(ctx)

	body = get(t, h)
	for _, want := range []string{`data-chain="order"`, `<td class="issued">120</td>`, "store_unavailable: 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

func get(t *testing.T, h interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request)
}) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
