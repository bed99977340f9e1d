package idplugin_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/tests/testdb"
)

// BenchRow says autoIncrement:false so that GORM builds the same INSERT with
// and without the plugin (which turns the implied auto-increment off): the
// difference between plugin and manual is then the plugin's own work.
type BenchRow struct {
	ID     int64 `gorm:"primaryKey;autoIncrement:false" idgen:"snowflake"`
	Name   string
	Amount int64
}

// benchDB opens a database for one sub-benchmark, with the plugin drawing
// from gen when withPlugin is set.
type benchDB func(b *testing.B, gen engine.Generator, withPlugin bool) *gorm.DB

func sqliteMemory(b *testing.B, gen engine.Generator, withPlugin bool) *gorm.DB {
	// A private in-memory database lives as long as its one connection.
	return benchOpen(b, sqlite.Open("file::memory:"), 1, gen, withPlugin)
}

func postgresDB(b *testing.B, gen engine.Generator, withPlugin bool) *gorm.DB {
	return benchOpen(b, postgres.Open(testdb.Postgres(b).DSN), 0, gen, withPlugin)
}

func benchOpen(b *testing.B, dial gorm.Dialector, conns int, gen engine.Generator, withPlugin bool) *gorm.DB {
	b.Helper()
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	if conns > 0 {
		sqlDB.SetMaxOpenConns(conns)
	}
	b.Cleanup(func() { sqlDB.Close() })
	if withPlugin {
		reg := genreg.New()
		if err := reg.Register("snowflake", "", gen); err != nil {
			b.Fatal(err)
		}
		if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.AutoMigrate(&BenchRow{}); err != nil {
		b.Fatal(err)
	}
	return db
}

func newSnowflake(b *testing.B) *snowflake.Generator {
	b.Helper()
	g, err := snowflake.New(1)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchCreate(b *testing.B, open benchDB) {
	b.Run("plugin", func(b *testing.B) {
		db := open(b, newSnowflake(b), true)
		b.ReportAllocs()
		for b.Loop() {
			r := BenchRow{Name: "row", Amount: 42}
			if err := db.Create(&r).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("manual", func(b *testing.B) {
		gen := newSnowflake(b)
		db := open(b, gen, false)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			id, err := gen.NextID(ctx)
			if err != nil {
				b.Fatal(err)
			}
			r := BenchRow{ID: id, Name: "row", Amount: 42}
			if err := db.Create(&r).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
}

const batchRows = 1000

func benchCreateInBatches(b *testing.B, open benchDB) {
	names := make([]string, batchRows)
	for i := range names {
		names[i] = "row" + strconv.Itoa(i)
	}
	fresh := func() []BenchRow {
		rows := make([]BenchRow, batchRows)
		for i := range rows {
			rows[i] = BenchRow{Name: names[i], Amount: int64(i)}
		}
		return rows
	}
	b.Run("plugin", func(b *testing.B) {
		db := open(b, newSnowflake(b), true)
		b.ReportAllocs()
		for b.Loop() {
			rows := fresh()
			if err := db.CreateInBatches(&rows, batchRows).Error; err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchRows), "ns/row")
	})
	b.Run("manual", func(b *testing.B) {
		gen := newSnowflake(b)
		db := open(b, gen, false)
		b.ReportAllocs()
		for b.Loop() {
			rows := fresh()
			assignIDs(b, gen, rows)
			if err := db.CreateInBatches(&rows, batchRows).Error; err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchRows), "ns/row")
	})
}

// BenchmarkCreate inserts one row per Create on SQLite in memory, its ID
// filled by the plugin or drawn from the same generator and set by hand.
func BenchmarkCreate(b *testing.B) { benchCreate(b, sqliteMemory) }

// BenchmarkCreateInBatches inserts 1,000 rows per CreateInBatches(rows, 1000)
// on SQLite in memory, plugin against manual.
func BenchmarkCreateInBatches(b *testing.B) { benchCreateInBatches(b, sqliteMemory) }

// BenchmarkCreatePostgres is BenchmarkCreate on PostgreSQL (skipped without a server).
func BenchmarkCreatePostgres(b *testing.B) { benchCreate(b, postgresDB) }

// BenchmarkCreateInBatchesPostgres is BenchmarkCreateInBatches on PostgreSQL.
func BenchmarkCreateInBatchesPostgres(b *testing.B) { benchCreateInBatches(b, postgresDB) }

// BenchmarkFill isolates the plugin's own work on 1,000 rows, no database:
// Fill against assigning IDs by hand, both from an atomic counter, so that a
// saturated snowflake sequence does not hide the difference. It is what the
// plugin adds to each row of a CreateInBatches. "one" fills a single row per
// call, as shard routing does; "paired" runs plugin and manual alternately
// in one loop and reports their ratio, which load on a shared machine
// cannot skew.
func BenchmarkFill(b *testing.B) {
	var n atomic.Int64
	gen := testreg.Func(func(context.Context) (int64, error) { return n.Add(1), nil })
	rows := make([]BenchRow, batchRows)
	db := sqliteMemory(b, gen, true)
	plugin := func() {
		clear(rows)
		if err := idplugin.Fill(db, &rows); err != nil {
			b.Fatal(err)
		}
	}
	manual := func() {
		clear(rows)
		assignIDs(b, gen, rows)
	}
	perRow := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchRows), "ns/row")
	}
	b.Run("plugin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			plugin()
		}
		perRow(b)
	})
	b.Run("manual", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			manual()
		}
		perRow(b)
	})
	b.Run("one", func(b *testing.B) {
		b.ReportAllocs()
		var r BenchRow
		for b.Loop() {
			r.ID = 0
			if err := idplugin.Fill(db, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("paired", func(b *testing.B) {
		paired(b, plugin, manual)
	})
}

// paired runs plugin and manual alternately (each first every other time)
// and reports each side's mean time per call, the plugin's overhead in
// percent of the sums, and the median over all pairs of the plugin's time
// over the manual's ("ratio-median"): the pairing cancels the load drift
// that separate sub-benchmarks suffer from on a shared, noisy machine, and
// the median ignores the pairs a preemption landed in.
func paired(b *testing.B, plugin, manual func()) {
	var tp, tm time.Duration
	var ratios []float64
	i := 0
	for b.Loop() {
		first, second := plugin, manual
		dp, dm := &tp, &tm
		if i%2 == 1 {
			first, second, dp, dm = manual, plugin, &tm, &tp
		}
		i++
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		t2 := time.Now()
		*dp += t1.Sub(t0)
		*dm += t2.Sub(t1)
		p, m := t1.Sub(t0), t2.Sub(t1)
		if dp == &tm {
			p, m = m, p
		}
		ratios = append(ratios, float64(p)/float64(m))
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "plugin-ns/op")
	b.ReportMetric(float64(tm.Nanoseconds())/float64(b.N), "manual-ns/op")
	b.ReportMetric(100*(float64(tp)/float64(tm)-1), "overhead-%")
	b.ReportMetric(ratios[len(ratios)/2], "ratio-median")
}

// BenchmarkPaired runs plugin and manual inserts alternately in one loop, on
// two in-memory SQLite databases, and reports each side's mean time per
// operation and the plugin's overhead in percent. On a shared, noisy machine
// the pairing cancels the load drift that separate sub-benchmarks suffer from.
func BenchmarkPaired(b *testing.B) { benchPaired(b, sqliteMemory) }

// BenchmarkPairedPostgres is BenchmarkPaired on two PostgreSQL databases.
func BenchmarkPairedPostgres(b *testing.B) { benchPaired(b, postgresDB) }

func benchPaired(b *testing.B, open benchDB) {
	ctx := context.Background()
	b.Run("Create", func(b *testing.B) {
		gen := newSnowflake(b)
		withPlugin, without := open(b, gen, true), open(b, gen, false)
		paired(b, func() {
			r := BenchRow{Name: "row", Amount: 42}
			if err := withPlugin.Create(&r).Error; err != nil {
				b.Fatal(err)
			}
		}, func() {
			id, err := gen.NextID(ctx)
			if err != nil {
				b.Fatal(err)
			}
			r := BenchRow{ID: id, Name: "row", Amount: 42}
			if err := without.Create(&r).Error; err != nil {
				b.Fatal(err)
			}
		})
	})
	batches := func(b *testing.B, pluginSide bool) {
		gen := newSnowflake(b)
		first, second := open(b, gen, pluginSide), open(b, gen, false)
		rows := make([]BenchRow, batchRows)
		insert := func(db *gorm.DB, draw bool) func() {
			return func() {
				for i := range rows {
					rows[i] = BenchRow{Name: "row", Amount: int64(i)}
				}
				if draw {
					assignIDs(b, gen, rows)
				}
				if err := db.CreateInBatches(&rows, batchRows).Error; err != nil {
					b.Fatal(err)
				}
			}
		}
		paired(b, insert(first, !pluginSide), insert(second, true))
	}
	b.Run("CreateInBatches", func(b *testing.B) { batches(b, true) })
	// Both sides manual, on two databases: the "overhead" it reports is the
	// measurement's noise floor on this machine.
	b.Run("CreateInBatchesNoiseFloor", func(b *testing.B) { batches(b, false) })
}

// assignIDs sets every row's ID by hand from gen: the "manual" side.
func assignIDs(b *testing.B, gen engine.Generator, rows []BenchRow) {
	ctx := context.Background()
	for i := range rows {
		id, err := gen.NextID(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rows[i].ID = id
	}
}
