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
)

// The page shows what Registry.Stats says (the registry's own tests check
// the counting): the machine ID, each chain's state, errors by reason.
func TestPageShowsMachineAndChains(t *testing.T) {
	var stats idforge.Stats
	h := &page{
		info:    pageInfo{Namespace: "orders<b>", LayoutName: "default", Store: "sqlite x", Layout: snowflake.Default},
		stats:   func() idforge.Stats { return stats },
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
		{Kind: "chain", Name: "down", Errors: map[string]int64{"store_unavailable": 1}, Step: 50, Failures: 1},
		{Kind: "chain", Name: "order", Issued: 120, Errors: map[string]int64{}, Step: 50, Fetches: 3},
		{Kind: "snowflake", Issued: 1, Errors: map[string]int64{}},
		{Kind: "snowflake", Name: "x", Errors: map[string]int64{"store_unavailable": 1}},
	}
	body = getPage(t, h)
	for _, want := range []string{`data-chain="order"`, `<td class="issued">120</td>`, "store_unavailable: 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

// The Store line says whether the store answers, since when it does not,
// and what was served and refused during the current and last outage.
func TestPageShowsOutages(t *testing.T) {
	detail := idforge.Stats{MachineID: 1}
	h := &page{
		info:    pageInfo{Namespace: "orders", LayoutName: "default", Store: "sqlite x", Layout: snowflake.Default},
		stats:   func() idforge.Stats { return detail },
		log:     slog.Default(),
		started: time.Now(),
	}
	check := func(want, lack []string) {
		t.Helper()
		body := getPage(t, h)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("page lacks %q:\n%s", w, body)
			}
		}
		for _, l := range lack {
			if strings.Contains(body, l) {
				t.Errorf("page has %q:\n%s", l, body)
			}
		}
	}
	check([]string{`id="store-state" class="muted">not asked yet<`}, []string{"outage-current", "outage-last"})

	detail.Calls = []idforge.StoreCall{{Op: "next_max_id", Name: "order"}}
	check([]string{`id="store-state" class="ok">reachable<`}, []string{"outage-current", "outage-last"})

	start := time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)
	detail.Outage = idforge.Outage{Start: start,
		Served: map[string]int64{"snowflake": 7, "chain": 3, "uuidv7": 0}, Refused: map[string]int64{"chain": 2, "snowflake": 0}}
	check([]string{`id="store-state" class="bad">down since 2026-11-25 09:30:00 UTC for `,
		`id="outage-current">served 10 (chain 3, snowflake 7), refused <span class="bad">2</span> (chain 2)<`}, []string{"outage-last"})

	detail.LastOutage, detail.Outage = detail.Outage, idforge.Outage{}
	detail.LastOutage.End = start.Add(90 * time.Second)
	detail.LastOutage.Refused = map[string]int64{}
	check([]string{`id="store-state" class="ok">reachable<`,
		`id="outage-last">2026-11-25 09:30:00 UTC to 2026-11-25 09:31:30 UTC (1m30s): served 10 (chain 3, snowflake 7), refused <span>0</span><`},
		[]string{"outage-current"})
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
