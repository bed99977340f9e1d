package sqlhook_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
)

// benchTarget opens two connections to one database, bare and through the
// plugin (drawing from gen), each inserting into a table of its own.
type benchTarget func(b *testing.B, reg engine.Provider) (bare, hooked *sql.DB)

func benchSQLite(b *testing.B, reg engine.Provider) (*sql.DB, *sql.DB) {
	// Private in-memory databases, one connection each.
	return benchOpen(b, "sqlite", "file::memory:", "", reg)
}

// benchMariaDB opens MariaDB with or without interpolateParams, its tables
// in engine (InnoDB flushes its log at every autocommit; MEMORY leaves
// the driver's path and the round trip).
func benchMariaDB(interpolate bool, tableEngine string) benchTarget {
	return func(b *testing.B, reg engine.Provider) (*sql.DB, *sql.DB) {
		cfg, err := mysql.ParseDSN(testdb.MariaDB(b).DSN)
		if err != nil {
			b.Fatal(err)
		}
		cfg.InterpolateParams = interpolate
		return benchOpen(b, "mysql", cfg.FormatDSN(), " ENGINE="+tableEngine, reg)
	}
}

func benchOpen(b *testing.B, driverName, dsn, tableOptions string, reg engine.Provider) (*sql.DB, *sql.DB) {
	b.Helper()
	bare, err := sql.Open(driverName, dsn)
	if err != nil {
		b.Fatal(err)
	}
	hooked, err := sqlhook.Open(driverName, dsn, sqlhook.Settings{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	for _, db := range []*sql.DB{bare, hooked} {
		db.SetMaxOpenConns(1)
		b.Cleanup(func() { db.Close() })
		if _, err := db.Exec("CREATE TABLE rows_" + side(db, bare) + " (id BIGINT PRIMARY KEY, name VARCHAR(16) NOT NULL, amount BIGINT NOT NULL)" + tableOptions); err != nil {
			b.Fatal(err)
		}
	}
	return bare, hooked
}

func side(db, bare *sql.DB) string {
	if db == bare {
		return "bare"
	}
	return "hook" // as long as "bare": the same statement length
}

const (
	insertBare   = "INSERT INTO rows_bare (id, name, amount) VALUES (?, ?, ?)"
	insertHooked = "INSERT INTO rows_hook (id, name, amount) VALUES (?, ?, ?)"
)

// execs are the three ways of inserting a row the benchmarks compare: bare
// (the ID drawn by hand, the bare driver), marker (the plugin draws), plain
// (the ID drawn by hand, through the plugin: a statement without a marker).
func execs(b *testing.B, open benchTarget) (bare, marker, plain func()) {
	gen, err := snowflake.New(1)
	if err != nil {
		b.Fatal(err)
	}
	reg := genreg.New()
	if err := reg.Register("snowflake", "", gen); err != nil {
		b.Fatal(err)
	}
	bareDB, hooked := open(b, reg)
	ctx := context.Background()
	byHand := func(db *sql.DB, q string) func() {
		return func() {
			id, err := gen.NextID(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, q, id, "row", 42); err != nil {
				b.Fatal(err)
			}
		}
	}
	marker = func() {
		if _, err := hooked.ExecContext(ctx, insertHooked, sqlhook.Next("snowflake", ""), "row", 42); err != nil {
			b.Fatal(err)
		}
	}
	bare, plain = byHand(bareDB, insertBare), byHand(hooked, insertHooked)
	for _, f := range []func(){bare, marker, plain} {
		f() // connect before the clock starts
	}
	return bare, marker, plain
}

// benchExec reports time and allocations per Exec of each way on its own,
// and the plugin's against the bare driver's paired in one loop.
func benchExec(b *testing.B, open benchTarget) {
	for _, name := range []string{"bare", "marker", "plain"} {
		b.Run(name, func(b *testing.B) {
			bare, marker, plain := execs(b, open)
			f := map[string]func(){"bare": bare, "marker": marker, "plain": plain}[name]
			b.ReportAllocs()
			for b.Loop() {
				f()
			}
		})
	}
	b.Run("paired-marker", func(b *testing.B) {
		bare, marker, _ := execs(b, open)
		paired(b, marker, bare)
	})
	b.Run("paired-plain", func(b *testing.B) {
		bare, _, plain := execs(b, open)
		paired(b, plain, bare)
	})
}

// benchNoop opens a driver that runs nothing (the test's fake, answering
// ExecContext, or driver.ErrSkip with skip), so that what remains is
// database/sql's work and the plugin's.
func benchNoop(skip bool) benchTarget {
	return func(b *testing.B, reg engine.Provider) (*sql.DB, *sql.DB) {
		bare := sql.OpenDB(&fake{full: true, skip: skip, discard: true})
		hooked := sql.OpenDB(sqlhook.Wrap(&fake{full: true, skip: skip, discard: true}, sqlhook.Settings{Registry: reg}))
		b.Cleanup(func() { bare.Close(); hooked.Close() })
		return bare, hooked
	}
}

// BenchmarkExecNoop isolates the plugin's own cost per Exec: the driver
// runs nothing, on the ExecContext path and on the ErrSkip path.
func BenchmarkExecNoop(b *testing.B) {
	b.Run("exec", func(b *testing.B) { benchExec(b, benchNoop(false)) })
	b.Run("prepare", func(b *testing.B) { benchExec(b, benchNoop(true)) })
}

// BenchmarkExecSQLite inserts one row per Exec into SQLite in memory.
func BenchmarkExecSQLite(b *testing.B) { benchExec(b, benchSQLite) }

// BenchmarkExecMariaDB inserts one row per Exec into MariaDB, into InnoDB
// and MEMORY tables, with the driver's defaults ("prepare": database/sql
// prepares, executes and closes a statement for each Exec, as the driver
// answers driver.ErrSkip) and with interpolateParams=true (one round trip).
func BenchmarkExecMariaDB(b *testing.B) {
	for _, tableEngine := range []string{"InnoDB", "MEMORY"} {
		for _, interpolate := range []bool{false, true} {
			name := tableEngine + "/prepare"
			if interpolate {
				name = tableEngine + "/interpolate"
			}
			b.Run(name, func(b *testing.B) { benchExec(b, benchMariaDB(interpolate, tableEngine)) })
		}
	}
}

// paired runs hooked and bare alternately (each first every other time)
// and reports each side's mean time per call, the plugin's overhead in
// percent of the sums, and the median over all pairs of hooked time over
// bare time ("ratio-median"): the pairing cancels the load drift that
// separate sub-benchmarks suffer from on a shared machine, and the median
// ignores the pairs a preemption landed in.
func paired(b *testing.B, hooked, bare func()) {
	var th, tb time.Duration
	var ratios []float64
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if i%2 == 0 {
			hooked()
		} else {
			bare()
		}
		t1 := time.Now()
		if i%2 == 0 {
			bare()
		} else {
			hooked()
		}
		t2 := time.Now()
		h, m := t1.Sub(t0), t2.Sub(t1)
		if i%2 == 1 {
			h, m = m, h
		}
		i++
		th += h
		tb += m
		ratios = append(ratios, float64(h)/float64(m))
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(th.Nanoseconds())/float64(b.N), "hooked-ns/op")
	b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(100*(float64(th)/float64(tb)-1), "overhead-%")
	b.ReportMetric(ratios[len(ratios)/2], "ratio-median")
}
