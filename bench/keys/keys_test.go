package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// required reports whether missing servers fail instead of skipping, as in
// the main module's tests/testdb.
func required() bool { return os.Getenv("IDFORGE_REQUIRE_SERVERS") == "1" }

// runOrSkip runs the benchmark, skipping (or failing, when servers are
// required) if the server cannot be reached.
func runOrSkip(tb testing.TB, cfg Config) *Report {
	tb.Helper()
	rep, err := Run(context.Background(), cfg)
	if errors.Is(err, errUnavailable) {
		if required() {
			tb.Fatalf("server required (IDFORGE_REQUIRE_SERVERS=1): %v", err)
		}
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// TestSmoke runs the whole benchmark with 20,000 rows per variant on each
// server and checks the report's shape, the chart, and that the database it
// made is gone. It checks no speed.
func TestSmoke(t *testing.T) {
	for _, server := range []string{"mariadb", "postgres"} {
		t.Run(server, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Rows, cfg.Reps, cfg.Servers = 20_000, 1, []string{server}
			rep := runOrSkip(t, cfg)
			if len(rep.Servers) != 1 {
				t.Fatalf("%d server reports, want 1", len(rep.Servers))
			}
			sr := rep.Servers[0]
			if len(sr.Variants) != len(cfg.Variants) {
				t.Fatalf("%d variants, want %d", len(sr.Variants), len(cfg.Variants))
			}
			size := map[string]float64{}
			for _, v := range sr.Variants {
				if len(v.Runs) != 1 || !v.Runs[0].Complete || v.Runs[0].Rows != cfg.Rows {
					t.Fatalf("%s: runs %+v, want one complete run of %d rows", v.Name, v.Runs, cfg.Rows)
				}
				r := v.Runs[0]
				for k, x := range r.RowsPerS {
					if !(x > 0) {
						t.Errorf("%s: tenth %d has rows/s %v", v.Name, k+1, x)
					}
				}
				if r.Primary <= 0 || r.Secondary <= 0 || r.Table <= 0 || r.Indexes <= 0 {
					t.Errorf("%s: sizes %+v", v.Name, r.Sizes)
				}
				if r.BufferPoolReads == nil {
					t.Errorf("%s: no buffer-pool reads", v.Name)
				}
				if (server == "mariadb") != (r.PageSplits != nil) {
					t.Errorf("%s: page splits %v on %s", v.Name, r.PageSplits, server)
				}
				if v.Median.Runs != 1 || v.Median.Primary != float64(r.Primary) {
					t.Errorf("%s: median %+v of one run %+v", v.Name, v.Median, r)
				}
				size[v.Name] = v.Median.Primary
			}
			// Random keys split pages and leave them part empty: a sanity
			// check that the sizes are read from the right index.
			if size[VarUUIDv4] <= size[VarAuto] {
				t.Errorf("UUIDv4 primary index %v bytes, not larger than AUTO_INCREMENT's %v", size[VarUUIDv4], size[VarAuto])
			}
			if len(sr.Checks) == 0 {
				t.Error("no checks evaluated")
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Fatal(err)
			}
			svg := Chart(rep, sr)
			dec := xml.NewDecoder(strings.NewReader(svg))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("chart is not well-formed XML: %v", err)
				}
			}
			if n := strings.Count(svg, "<polyline"); n != len(cfg.Variants) {
				t.Errorf("chart has %d lines, want %d", n, len(cfg.Variants))
			}
			assertDropped(t, cfg, server, sr.Database)
		})
	}
}

func assertDropped(t *testing.T, cfg Config, server, name string) {
	t.Helper()
	driver, dsn, q := "mysql", cfg.MySQL, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
	if server == "postgres" {
		driver, dsn, q = "pgx", cfg.Postgres, "SELECT COUNT(*) FROM pg_database WHERE datname = $1"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s left behind", name)
	}
}

func TestProgressRates(t *testing.T) {
	start := time.Now().Add(-time.Second)
	p := newProgress(100, start)
	p.add(45) // one batch over four tenths and a half, in about a second
	p.lastAt = start.Add(time.Second)
	p.add(55)
	r := p.rates()
	if len(r) != Tenths || p.rows() != 100 {
		t.Fatalf("rates %v, rows %d", r, p.rows())
	}
	for k, x := range r {
		if !(x > 0) {
			t.Errorf("tenth %d: rate %v, want > 0 (interpolated within a batch)", k+1, x)
		}
	}
	if r[0] < 0.9*r[3] || r[0] > 1.1*r[3] {
		t.Errorf("tenths of one batch differ: %v", r)
	}
}

func TestMedianAndChecks(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median 3 1 2 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median 4 1 2 3 = %v", m)
	}
	// lasts are the last tenth's rows/s of reps 1, 2, 3.
	mk := func(name string, primary, secondary float64, lasts ...float64) *VariantReport {
		v := &VariantReport{Name: name}
		for i, last := range lasts {
			rates := make([]float64, Tenths)
			rates[Tenths-1] = last
			v.Runs = append(v.Runs, &Trial{Rep: i + 1, Complete: true, RowsPerS: rates})
		}
		v.Median = summarize(v.Runs)
		v.Median.Primary, v.Median.Secondary = primary, secondary
		return v
	}
	// The machine's speed moves from rep to rep: the snowflake's ratios to
	// auto within each rep (1.04, 0.96, 0.75) have the median 0.96 and pass,
	// although the ratio of the medians (90/100) would not.
	sr := &ServerReport{Variants: []*VariantReport{
		mk(VarAuto, 100, 10, 100, 50, 120),
		mk(VarSnowflake, 105, 7, 104, 48, 90),
		mk(VarFleet, 105, 7, 50, 100, 118),
		mk(VarUUIDv4, 200, 14, 40, 20, 60),
		mk(VarUUIDv7, 110, 14, 90, 45, 110),
	}}
	got := map[string]Check{}
	for _, c := range checks(sr) {
		got[c.What] = c
	}
	for what, want := range map[string]struct {
		value float64
		pass  bool
	}{
		"snowflake / auto rows/s, last tenth":     {0.96, true},
		"snowflake / uuidv4 rows/s, last tenth":   {2.4, true},
		"snowflake / auto primary index size":     {1.05, true},
		"snowflake / uuidv7 secondary index size": {0.5, true},
		"fleet / auto rows/s, last tenth":         {0.983, true},
	} {
		if c, ok := got[what]; !ok || c.Pass != want.pass || math.Abs(c.Value-want.value) > 0.001 {
			t.Errorf("check %q = %+v, want value %v pass %v", what, c, want.value, want.pass)
		}
	}
	if c := got["snowflake / auto rows/s, last tenth"]; !strings.Contains(c.Note, "median of 3 per-rep ratios (0.750–1.040); ratio of the medians 0.900") {
		t.Errorf("snowflake note %q: want the paired ratios' range and the ratio of the medians", c.Note)
	}
	if c := got["fleet / auto rows/s, last tenth"]; !strings.Contains(c.Note, "not a target") {
		t.Errorf("fleet note %q: want that it is not a target", c.Note)
	}
	if len(got) != 8 {
		t.Errorf("%d checks, want 8 (snowflake and fleet; chain absent): %v", len(got), got)
	}
}

// BenchmarkKeys inserts through the benchmark's own path, one variant per
// sub-benchmark and one op per INSERT of 100 rows into a fresh table, and
// reports rows/s and the bytes per row of the primary and secondary index.
// CI runs it as a smoke (-benchtime 200x: 20,000 rows per variant); the
// full comparison is `go run ./keys` (see main.go).
func BenchmarkKeys(b *testing.B) {
	const batch = 100
	for _, server := range []string{"mariadb", "postgres"} {
		b.Run(server, func(b *testing.B) {
			for _, variant := range defaultConfig().Variants {
				b.Run(variant, func(b *testing.B) {
					cfg := defaultConfig()
					cfg.Rows, cfg.Reps, cfg.Batch = int64(max(b.N*batch, Tenths)), 1, batch
					cfg.Servers, cfg.Variants = []string{server}, []string{variant}
					rep := runOrSkip(b, cfg)
					r := rep.Servers[0].Variants[0].Runs[0]
					b.ReportMetric(r.Seconds*1e9/float64(b.N), "ns/op")
					b.ReportMetric(float64(r.Rows)/r.Seconds, "rows/s")
					b.ReportMetric(float64(r.Primary)/float64(r.Rows), "primary-B/row")
					b.ReportMetric(float64(r.Secondary)/float64(r.Rows), "secondary-B/row")
				})
			}
		})
	}
}

// TestTableShape: -account-type int makes account_id 4 bytes and -index
// created_at moves the secondary index to created_at, on both servers, and
// anything else is refused by name.
func TestTableShape(t *testing.T) {
	cfg := defaultConfig()
	cfg.AccountType, cfg.Accounts, cfg.Index = "smallint", 0, "payload"
	err := cfg.check()
	for _, want := range []string{`-account-type "smallint"`, "-accounts 0", `-index "payload"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check = %v; want %s refused", err, want)
		}
	}
	for _, name := range []string{"mariadb", "postgres"} {
		t.Run(name, func(t *testing.T) {
			s := &server{name: name, account: accountSQL("int"), index: "created_at"}
			index := map[string]string{"mariadb": "KEY t_secondary (created_at)", "postgres": "CREATE INDEX t_secondary ON t (created_at)"}[name]
			ddl := strings.Join(s.tableDDL("t", pkInt), "; ")
			for _, want := range []string{"account_id INTEGER NOT NULL", index} {
				if !strings.Contains(ddl, want) {
					t.Errorf("DDL %s: want %s", ddl, want)
				}
			}
			cfg := defaultConfig()
			cfg.Rows, cfg.Reps, cfg.Servers, cfg.Variants, cfg.AccountType, cfg.Index = 2_000, 1, []string{name}, []string{VarSnowflake}, "int", "created_at"
			rep := runOrSkip(t, cfg)
			if r := rep.Servers[0].Variants[0].Runs[0]; !r.Complete || r.Rows != cfg.Rows || r.Secondary <= 0 {
				t.Fatalf("run %+v, want %d rows into the table with an INT account_id and a measured index on created_at", r, cfg.Rows)
			}
			if rep.Config.Index != "created_at" {
				t.Errorf("the report says index %q", rep.Config.Index)
			}
			if rep.Config.AccountType != "int" {
				t.Errorf("the report says account type %q", rep.Config.AccountType)
			}
		})
	}
}
