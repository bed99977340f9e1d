package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/regstats"
)

// The page shows what Registry.Stats says (the registry's own tests check
// the counting): the machine ID, each chain's state, errors by reason.
func TestPageShowsMachineAndChains(t *testing.T) {
	var stats idforge.Stats
	var detail regstats.Detail
	h := &page{
		info:    pageInfo{Namespace: "orders<b>", LayoutName: "default", Store: "sqlite x", Layout: snowflake.Default},
		stats:   func() (idforge.Stats, regstats.Detail) { return stats, detail },
		refresh: 5 * time.Second,
		log:     slog.Default(),
		started: time.Now(),
	}
	stats = idforge.Stats{MachineID: 42}
	body := getPage(t, h)
	for _, want := range []string{`id="machine-id">42<`, `id="no-chains"`, "orders&lt;b&gt;", "No segment fetched yet", `http-equiv="refresh"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	stats.Generators = []idforge.GeneratorStats{
		{Kind: "chain", Name: "down", Errors: map[string]int64{"store_unavailable": 1}},
		{Kind: "chain", Name: "order", Issued: 120, Errors: map[string]int64{}},
		{Kind: "snowflake", Issued: 1, Errors: map[string]int64{}},
		{Kind: "snowflake", Name: "x", Errors: map[string]int64{"store_unavailable": 1}},
	}
	detail.Chains = map[string]regstats.Chain{"down": {Step: 50, Failures: 1}, "order": {Step: 50, Fetches: 3}}
	body = getPage(t, h)
	for _, want := range []string{`data-chain="order"`, `<td class="issued">120</td>`, "store_unavailable: 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

func getPage(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
