package sharding

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone tests must not depend on the host's zoneinfo

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
)

func mustInterval(t *testing.T, cfg Interval) *Router {
	t.Helper()
	if cfg.Layout == (snowflake.Layout{}) {
		cfg.Layout = snowflake.Default
	}
	if cfg.Clock == nil { // IDs of any date up to 2100 route
		cfg.Clock = clocktest.NewFake(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	r, err := NewInterval(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// idAt composes a Default-layout ID issued at t.
func idAt(t *testing.T, at time.Time) int64 {
	t.Helper()
	id, err := snowlayout.Compose(snowflake.Default, at, 7, 123)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func routeTable(t *testing.T, r *Router, id int64) string {
	t.Helper()
	s, err := r.Route(id)
	if err != nil {
		t.Fatalf("Route(%d): %v", id, err)
	}
	return s.TableName
}

func TestIntervalYearBoundary(t *testing.T) {
	last := time.Date(2026, 12, 31, 23, 59, 59, 999e6, time.UTC)
	next := last.Add(time.Millisecond)
	for _, c := range []struct {
		period        string
		before, after string
		table         string
	}{
		{"yearly", "order_2026", "order_2027", "order_{2006}"},
		{"monthly", "order_202612", "order_202701", "order_{200601}"},
		{"daily", "order_20261231", "order_20270101", "order_{20060102}"},
		{"monthly", "log2026_12", "log2027_01", "log{2006_01}"},
	} {
		r := mustInterval(t, Interval{Table: c.table})
		if got := routeTable(t, r, idAt(t, last)); got != c.before {
			t.Errorf("%v: Dec 31 23:59:59.999 → %s, want %s", c.period, got, c.before)
		}
		if got := routeTable(t, r, idAt(t, next)); got != c.after {
			t.Errorf("%v: Jan 1 00:00:00.000 → %s, want %s", c.period, got, c.after)
		}
		// The highest ID of the last millisecond and the lowest of the next.
		hi, _ := snowlayout.Compose(snowflake.Default, last, snowlayout.MaxMachineID(snowflake.Default), snowlayout.MaxSequence(snowflake.Default))
		lo, _ := snowlayout.Compose(snowflake.Default, next, 0, 0)
		if hi+1 != lo || routeTable(t, r, hi) != c.before || routeTable(t, r, lo) != c.after {
			t.Errorf("%v: ids %d/%d straddling the year do not split at the boundary", c.period, hi, lo)
		}
	}
}

func TestIntervalMonthBoundaries(t *testing.T) {
	r := mustInterval(t, Interval{Table: "order_{200601}"})
	for m := time.January; m <= time.December; m++ {
		start := time.Date(2028, m, 1, 0, 0, 0, 0, time.UTC) // 2028: leap year, Feb 29
		end := start.AddDate(0, 1, 0)
		want := "order_" + start.Format("200601")
		if got := routeTable(t, r, idAt(t, start)); got != want {
			t.Errorf("first ms of %s → %s", want, got)
		}
		if got := routeTable(t, r, idAt(t, end.Add(-time.Millisecond))); got != want {
			t.Errorf("last ms of %s → %s", want, got)
		}
	}
	if got := routeTable(t, r, idAt(t, time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC))); got != "order_202802" {
		t.Errorf("Feb 29 → %s", got)
	}
}

func TestIntervalTimeZone(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	r := mustInterval(t, Interval{Table: "order_{200601}", Location: shanghai})
	utc := mustInterval(t, Interval{Table: "order_{200601}"})
	// 2026-11-30T16:00Z is midnight of December 1st in Shanghai (UTC+8).
	midnight := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	if got := routeTable(t, r, idAt(t, midnight.Add(-time.Millisecond))); got != "order_202611" {
		t.Errorf("Shanghai Nov 30 23:59:59.999 → %s", got)
	}
	if got := routeTable(t, r, idAt(t, midnight)); got != "order_202612" {
		t.Errorf("Shanghai Dec 1 00:00 → %s", got)
	}
	if got := routeTable(t, utc, idAt(t, midnight)); got != "order_202611" {
		t.Errorf("UTC Nov 30 16:00 → %s", got)
	}

	// Daily buckets in a zone with DST follow its calendar: the day DST
	// starts (2026-03-08 in New York) has 23 hours, the next day 24.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	d := mustInterval(t, Interval{Table: "ev_{20060102}", Location: ny})
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 3, 8, 4, 59, 59, 999e6, time.UTC), "ev_20260307"}, // 23:59:59.999 EST
		{time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), "ev_20260308"},       // 00:00 EST
		{time.Date(2026, 3, 9, 3, 59, 59, 999e6, time.UTC), "ev_20260308"}, // 23:59:59.999 EDT
		{time.Date(2026, 3, 9, 4, 0, 0, 0, time.UTC), "ev_20260309"},       // 00:00 EDT
	} {
		if got := routeTable(t, d, idAt(t, c.at)); got != c.want {
			t.Errorf("New York %s → %s, want %s", c.at.In(ny), got, c.want)
		}
		if got, _ := d.Tables(c.at, c.at.Add(time.Nanosecond)); !slices.Equal(got, []string{c.want}) {
			t.Errorf("Tables at %s = %s, want %s", c.at.In(ny), got, c.want)
		}
	}
	// In UTC, the default, the same instants fall in UTC days: DST plays no part.
	u := mustInterval(t, Interval{Table: "ev_{20060102}"})
	if got := routeTable(t, u, idAt(t, time.Date(2026, 3, 8, 4, 59, 59, 0, time.UTC))); got != "ev_20260308" {
		t.Errorf("UTC → %s", got)
	}
	if got := mustTables(t, u, time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)); !slices.Equal(got,
		[]string{"ev_20260307", "ev_20260308", "ev_20260309"}) {
		t.Errorf("UTC Tables across the DST change = %v", got)
	}
}

func TestIntervalTables(t *testing.T) {
	r := mustInterval(t, Interval{Table: "order_{200601}"})
	at := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		from, to time.Time
		want     []string
	}{
		{at(2026, 11, 15), at(2027, 1, 10), []string{"order_202611", "order_202612", "order_202701"}},
		{at(2026, 11, 1), at(2026, 12, 1), []string{"order_202611"}}, // to is exclusive
		{at(2026, 11, 1), at(2026, 12, 1).Add(time.Nanosecond), []string{"order_202611", "order_202612"}},
		{at(2026, 11, 5), at(2026, 11, 5), nil},
		{at(2026, 12, 5), at(2026, 11, 5), nil},
	}
	for _, c := range cases {
		if got := mustTables(t, r, c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("Tables(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	y := mustInterval(t, Interval{Table: "y{2006}"})
	if got := mustTables(t, y, at(2024, 6, 1), at(2027, 1, 1)); !slices.Equal(got, []string{"y2024", "y2025", "y2026"}) {
		t.Errorf("yearly Tables = %v", got)
	}
	dl := mustInterval(t, Interval{Table: "d_{20060102}"})
	if got := mustTables(t, dl, at(2028, 2, 28), at(2028, 3, 2)); !slices.Equal(got, []string{"d_20280228", "d_20280229", "d_20280301"}) {
		t.Errorf("daily Tables = %v", got)
	}
	if _, err := r.Shards(); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("unbounded Shards: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := NewShardCounter(r); err == nil {
		t.Error("NewShardCounter of an unbounded interval router succeeded")
	}
}

func TestIntervalBounds(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	r := mustInterval(t, Interval{Table: "order_{200601}", Start: start, End: end})
	shards, err := r.Shards()
	if err != nil || len(shards) != 12 {
		t.Fatalf("Shards = %d, %v; want 12", len(shards), err)
	}
	for i, s := range shards {
		want := "order_" + start.AddDate(0, i, 0).Format("200601")
		if s.TableName != want || s.Database != 0 || s.String() != want {
			t.Errorf("shard %d = %+v, want %s", i, s, want)
		}
	}
	s, err := r.Route(idAt(t, time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)))
	if err != nil || s != shards[6] {
		t.Errorf("July: %+v, %v; want %+v", s, err, shards[6])
	}
	for _, out := range []time.Time{start.Add(-time.Millisecond), end} {
		if _, err := r.Route(idAt(t, out)); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "outside") {
			t.Errorf("Route at %s: err = %v, want ErrInvalidID naming the range", out, err)
		}
		if got, err := r.Tables(out, out.Add(time.Nanosecond)); err != nil || len(got) != 0 {
			t.Errorf("Tables at %s = %v, %v; want none", out, got, err)
		}
	}
	if got := mustTables(t, r, start.AddDate(-1, 0, 0), start.AddDate(0, 2, 0)); !slices.Equal(got, []string{"order_202601", "order_202602"}) {
		t.Errorf("Tables clipped to Start = %v", got)
	}
	if got := mustTables(t, r, end.AddDate(0, -1, 0), end.AddDate(5, 0, 0)); !slices.Equal(got, []string{"order_202612"}) {
		t.Errorf("Tables clipped to End = %v", got)
	}
}

func TestIntervalRouteErrors(t *testing.T) {
	r := mustInterval(t, Interval{Layout: snowflake.JSSafe, Table: "t_{20060102}"})
	if _, err := r.Route(-5); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Route(-5): err = %v", err)
	}
	if _, err := r.Route(snowlayout.MaxID(snowflake.JSSafe) + 1); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Route(MaxID+1): err = %v", err)
	}
}

func TestIntervalInvalidConfig(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := snowflake.Default
	bad.SequenceBits = 40
	cases := map[string]struct {
		cfg  Interval
		want error
	}{
		"bad layout":      {Interval{Layout: bad, Table: "t_{20060102}"}, engine.ErrInvalidConfig},
		"no layout":       {Interval{Layout: snowflake.Default, Table: "t_"}, engine.ErrInvalidConfig},
		"empty layout":    {Interval{Layout: snowflake.Default, Table: "t_{}"}, engine.ErrInvalidConfig},
		"two layouts":     {Interval{Layout: snowflake.Default, Table: "t_{2006}_{01}"}, engine.ErrInvalidConfig},
		"end before":      {Interval{Layout: snowflake.Default, Table: "t_{20060102}", Start: start, End: start}, engine.ErrInvalidConfig},
		"repeating names": {Interval{Layout: snowflake.Default, Table: "t_{01}"}, engine.ErrInvalidConfig},
		"hour in daily":   {Interval{Layout: snowflake.Default, Table: "t_{20060102_15}"}, engine.ErrInvalidConfig},
		"hour alone":      {Interval{Layout: snowflake.Default, Table: "t_{15}"}, engine.ErrInvalidConfig},
		"unsafe prefix":   {Interval{Layout: snowflake.Default, Table: "order-{20060102}"}, engine.ErrInvalidConfig},
	}
	for name, c := range cases {
		if _, err := NewInterval(c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

// An ID read with another layout than it was made with lands in the
// future: a seconds ID read in milliseconds, weeks ahead. The router
// refuses IDs more than maxAhead after its clock.
func TestIntervalRefusesFutureIDs(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)
	r := mustInterval(t, Interval{Table: "order_{200601}", Clock: clocktest.NewFake(now)})
	seconds, err := snowlayout.Compose(snowflake.Seconds, now, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Route(seconds); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "layout") {
		t.Errorf("seconds ID through a milliseconds router: %v, %v; want engine.ErrInvalidID naming the layout", s, err)
	}
	for ahead, ok := range map[time.Duration]bool{0: true, -time.Hour: true, maxAhead: true, maxAhead + time.Millisecond: false} {
		_, err := r.Route(idAt(t, now.Add(ahead)))
		if ok != (err == nil) || !ok && !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("ID issued %s after the router's clock: err = %v", ahead, err)
		}
	}
}

// IDs from a real generator route by the time the generator read from its clock.
func TestIntervalWithGenerator(t *testing.T) {
	fc := clocktest.NewFake(time.Date(2026, 11, 30, 23, 59, 59, 990e6, time.UTC))
	g, err := snowflake.New(3, snowflake.Settings{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	r := mustInterval(t, Interval{Table: "order_{200601}"})
	counts := map[string]int{}
	for range 40 {
		id, err := g.NextID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		counts[routeTable(t, r, id)]++
		fc.Advance(time.Millisecond / 2)
	}
	// 20 ms of IDs, 10 ms before midnight and 10 after.
	if counts["order_202611"] != 20 || counts["order_202612"] != 20 {
		t.Errorf("counts = %v, want 20 in each month", counts)
	}
}

func mustTables(t *testing.T, r *Router, from, to time.Time) []string {
	t.Helper()
	got, err := r.Tables(from, to)
	if err != nil {
		t.Fatalf("Tables(%s, %s): %v", from, to, err)
	}
	return got
}
