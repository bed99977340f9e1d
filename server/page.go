// The state page of `idforge serve` at /: one server-rendered HTML page
// (html/template, no script) showing the machine ID and its lease, whether
// the store answers and what was served and refused during the current and
// last outage, each generator's issued IDs, each segment chain's prefetch state and hunger,
// and the latency of recent store calls, all read from Registry.Stats. It
// refreshes itself every few seconds with a meta refresh.

package server

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/snowlayout"
)

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms":  func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) },
	"ago": ago,
	"pct": func(part, whole int64) int64 {
		if whole <= 0 {
			return 0
		}
		return min(100, part*100/whole)
	},
	"mul": func(a, b int64) int64 { return a * b },
	"add": func(a, b int64) int64 { return a + b },
	"segs": func(ahead, step int64) string {
		if step <= 0 {
			return "0"
		}
		return fmt.Sprintf("%.1f", float64(ahead)/float64(step))
	},
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
}).Parse(pageHTML))

// pageInfo describes the service in the page's header.
type pageInfo struct {
	Namespace, LayoutName, Store string
	Layout                       snowflake.Layout
}

// page is the state page handler.
type page struct {
	info    pageInfo
	stats   func() idforge.Stats
	refresh time.Duration // the meta-refresh period; 0 turns it off
	log     *slog.Logger
	started time.Time
}

// newPage returns the state page of s, drawing its figures from stats.
func newPage(stats func() idforge.Stats, s *Server) *page {
	// No fallback to the store's own description: it may hold an address.
	info := pageInfo{Namespace: s.cfg.Instance.Namespace, LayoutName: layoutName(s.cfg.Layout), Store: s.cfg.StoreName, Layout: s.cfg.Layout}
	return &page{info: info, stats: stats, refresh: 5 * time.Second, log: s.log, started: time.Now()}
}

// view is what the template renders.
type view struct {
	pageInfo
	Snap          idforge.Stats
	Now           time.Time
	Recent        []idforge.StoreCall // segment fetches
	RecentLease   []idforge.StoreCall // machine-ID calls
	RefreshSec    int
	Uptime        string
	LeaseState    string
	LeaseError    string // the lease's last call failed with this; "" if it succeeded
	LeaseOK       bool
	StoreState    string // reachable, not asked yet, or down since when and for how long
	StoreOK       bool
	Outage, Last  *outageRow // the current and the last store outage, nil without
	Expiry        string
	Chains        []idforge.GeneratorStats
	Others        []idforge.GeneratorStats
	P50, P99, Max time.Duration
	Fetches       int
}

// outageRow is a store outage on the page.
type outageRow struct {
	Start, End, For     string // End "" while it lasts
	Served, Refused     int64
	ServedBy, RefusedBy string // by kind, the kinds with IDs only
}

// newOutageRow returns the row of o, nil when there is no outage.
func newOutageRow(o idforge.Outage, now time.Time) *outageRow {
	if o.Start.IsZero() {
		return nil
	}
	row := &outageRow{Start: stamp(o.Start), For: span(o.Duration(now))}
	if !o.End.IsZero() {
		row.End = stamp(o.End)
	}
	for _, n := range o.Served {
		row.Served += n
	}
	for _, n := range o.Refused {
		row.Refused += n
	}
	row.ServedBy, row.RefusedBy = byKind(o.Served), byKind(o.Refused)
	return row
}

// stamp is a time on the page: outages may be days old, so with the date.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// span is a duration on the page, to the second past one.
func span(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// byKind says "snowflake 7, chain 3" of the kinds with IDs, "" if none.
func byKind(m map[string]int64) string {
	var parts []string
	for k, n := range m {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (h *page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.stats()
	v := view{pageInfo: h.info, Snap: s, Now: time.Now(), Uptime: time.Since(h.started).Round(time.Second).String()}
	// Every token holder reads the page: errors show as the engine's words
	// for what happened, never the store's, which may name its address.
	for _, c := range s.Calls {
		c.Err = pageError(c.Err)
		if c.Op == "next_max_id" {
			v.Recent = append(v.Recent, c)
		} else {
			v.RecentLease = append(v.RecentLease, c)
		}
	}
	if h.refresh > 0 {
		v.RefreshSec = max(1, int(h.refresh.Seconds()))
	}
	if h.info.Layout.Unit != 0 {
		v.Expiry = snowlayout.Expiry(h.info.Layout).UTC().Format("2006-01-02")
	}
	if len(v.RecentLease) > 0 { // newest first: the lease's last call
		v.LeaseError = v.RecentLease[0].Err
	}
	switch {
	case s.MachineID < 0:
		v.LeaseState = "no machine ID"
	case v.LeaseError != "":
		v.LeaseState = "held, last heartbeat failed"
	case !s.Confirmed.IsZero():
		v.LeaseState, v.LeaseOK = "held, confirmed "+ago(s.Confirmed), true
	default:
		v.LeaseState, v.LeaseOK = "held", true
	}
	v.Outage, v.Last = newOutageRow(s.Outage, v.Now), newOutageRow(s.LastOutage, v.Now)
	switch {
	case v.Outage != nil:
		v.StoreState = "down since " + v.Outage.Start + " for " + v.Outage.For
	case len(s.Calls) == 0: // no store, or none asked yet: nothing to say it answers
		v.StoreState = "not asked yet"
	default:
		v.StoreState, v.StoreOK = "reachable", true
	}
	for _, g := range s.Generators {
		if g.Kind == genreg.Chain {
			if g.LastError != nil {
				g.LastError = errors.New(pageError(g.LastError.Error()))
			}
			v.Chains = append(v.Chains, g)
		} else {
			v.Others = append(v.Others, g)
		}
	}
	var ds []time.Duration
	for _, c := range v.Recent {
		ds = append(ds, c.Duration)
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		v.P50, v.P99, v.Max = ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], ds[len(ds)-1]
		v.Fetches = len(ds)
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		h.log.Error("idforge serve: state page", "err", err)
		http.Error(w, "the state page failed to render", http.StatusServiceUnavailable)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	w.Write(buf.Bytes())
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms ago", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s ago", d.Seconds())
	default:
		return d.Round(time.Second).String() + " ago"
	}
}
