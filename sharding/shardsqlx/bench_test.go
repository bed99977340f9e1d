package shardsqlx_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardsqlx"
	"github.com/idforge/idforge/tests/testdb"
)

type benchRow struct {
	ID     int64  `db:"id" idgen:"snowflake"`
	UserID int64  `db:"user_id"`
	Total  int64  `db:"total"`
	Name   string `db:"name"`
}

const (
	benchRows  = 160000 // 10,000 per shard
	benchTable = "CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, total BIGINT NOT NULL, name VARCHAR(64) NOT NULL)"
)

// benchPages holds the same rows in 16 shards (two SQLite files of eight
// tables) and in one table of a third file, and the page both read.
type benchPages struct {
	sharded *shardsqlx.Repository
	one     *sqlx.DB
	mid     benchRow // the row the pages start after
}

func newBenchPages(b *testing.B, backend func(testing.TB) testdb.DB, parallel int) *benchPages {
	ctx := context.Background()
	reg := shardtest.Registry(b)
	sixteen, err := sharding.NewMod(sharding.Mod{Databases: "ds_{0..1}", Tables: "t_{0..7}"})
	if err != nil {
		b.Fatal(err)
	}
	single, err := sharding.NewMod(sharding.Mod{Tables: "t"})
	if err != nil {
		b.Fatal(err)
	}
	open := func() *sqlx.DB {
		d := backend(b)
		db := sqlx.NewDb(d.Open(b), d.Driver)
		// Keep a connection per shard read at once: a SQLite connection
		// opened afresh has to read its pages again.
		db.SetMaxIdleConns(16)
		return db
	}
	sharded, err := shardsqlx.New([]*sqlx.DB{open(), open()}, sixteen, reg, sharding.Settings{Parallel: parallel})
	if err != nil {
		b.Fatal(err)
	}
	one := open()
	unsharded, err := shardsqlx.New([]*sqlx.DB{one}, single, reg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]benchRow, benchRows)
	for i := range rows {
		rows[i] = benchRow{UserID: rng.Int64N(1000), Total: rng.Int64N(1000), Name: fmt.Sprint("order ", i)}
	}
	for _, r := range []*shardsqlx.Repository{sharded, unsharded} {
		if err := r.Exec(ctx, benchTable); err != nil {
			b.Fatal(err)
		}
		err := r.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
			_, err := db.ExecContext(ctx, fmt.Sprintf("CREATE INDEX %s_user ON %s (user_id, id)", s.TableName, s.TableName))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Create(ctx, rows); err != nil { // the second Create inserts the same IDs
			b.Fatal(err)
		}
	}
	mid := slices.Clone(rows)
	slices.SortFunc(mid, func(a, b benchRow) int { return cmp.Compare(a.ID, b.ID) })
	return &benchPages{sharded: sharded, one: one, mid: mid[len(mid)/2]}
}

// pages are the two 50-row pages measured: by ID, newest first, after the
// middle row; and a filtered page by user, after the middle row's user.
var pages = []struct {
	name  string
	query func(after benchRow) sharding.Query
	sql   string
	args  func(after benchRow) []any
}{
	{
		"by-id",
		func(after benchRow) sharding.Query { return sharding.Query{Order: "id DESC", Limit: 50, After: after} },
		"SELECT id, user_id, total, name FROM t WHERE id < ? ORDER BY id DESC LIMIT 50",
		func(after benchRow) []any { return []any{after.ID} },
	},
	{
		"filtered-by-user",
		func(after benchRow) sharding.Query {
			return sharding.Query{Where: "total > ?", Args: []any{500}, Order: "user_id", Limit: 50, After: after}
		},
		"SELECT id, user_id, total, name FROM t WHERE total > ? AND user_id >= ? AND (user_id > ? OR id > ?) ORDER BY user_id, id LIMIT 50",
		func(after benchRow) []any { return []any{500, after.UserID, after.UserID, after.ID} },
	},
}

// BenchmarkPage reads a 50-row page over 16 shards (two databases of eight
// tables) and the same page from one unsharded table of the same rows (a
// third database), on SQLite files; BenchmarkPageServers does the same on
// MariaDB and PostgreSQL. "paired" runs both alternately in one loop (each
// first every other time) and reports the median latency and CPU time of
// each side, their rows per second, and the medians of the pairs' sharded
// ÷ unsharded ratios; "sharded" and "unsharded" run one side alone for its
// allocations. The shards are read Settings.Parallel at a time (8, the
// default, and 16).
func BenchmarkPage(b *testing.B) { benchPage(b, testdb.SQLite, 8, 16) }

// BenchmarkPageServers is BenchmarkPage on MariaDB and PostgreSQL.
func BenchmarkPageServers(b *testing.B) {
	b.Run("mariadb", func(b *testing.B) { benchPage(b, testdb.MariaDB, 8) })
	b.Run("postgres", func(b *testing.B) { benchPage(b, testdb.Postgres, 8) })
}

func benchPage(b *testing.B, backend func(testing.TB) testdb.DB, parallels ...int) {
	ctx := context.Background()
	for _, parallel := range parallels {
		p := newBenchPages(b, backend, parallel)
		for _, pg := range pages {
			q, args, query := pg.query(p.mid), pg.args(p.mid), p.one.Rebind(pg.sql)
			sharded := func() {
				var page []benchRow
				if err := p.sharded.Page(ctx, q, &page); err != nil || len(page) != 50 {
					b.Fatalf("sharded page: %d rows, %v", len(page), err)
				}
			}
			unsharded := func() {
				var page []benchRow
				if err := p.one.SelectContext(ctx, &page, query, args...); err != nil || len(page) != 50 {
					b.Fatalf("unsharded page: %d rows, %v", len(page), err)
				}
			}
			name := fmt.Sprintf("%s/parallel-%d", pg.name, parallel)
			b.Run(name+"/paired", func(b *testing.B) { pairedMedians(b, sharded, unsharded) })
			b.Run(name+"/sharded", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sharded()
				}
			})
			b.Run(name+"/unsharded", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					unsharded()
				}
			})
		}
	}
}

// pairedMedians runs a and z alternately, the first of the pair swapping
// every time, and reports each side's median latency, its rows per second
// (of a 50-row page) and its median CPU time (the process's, all threads:
// the work, whatever else the machine runs), and the medians of a ÷ z
// over the pairs, of latency and of CPU time.
func pairedMedians(b *testing.B, a, z func()) {
	var da, dz, ca, cz []time.Duration
	var ratios, cpuRatios []float64
	i := 0
	for b.Loop() {
		first, second := a, z
		if i%2 == 1 {
			first, second = z, a
		}
		c0, t0 := cpuTime(b), time.Now()
		first()
		c1, t1 := cpuTime(b), time.Now()
		second()
		c2, t2 := cpuTime(b), time.Now()
		x, y, cx, cy := t1.Sub(t0), t2.Sub(t1), c1-c0, c2-c1
		if i%2 == 1 {
			x, y, cx, cy = y, x, cy, cx
		}
		i++
		da, dz, ca, cz = append(da, x), append(dz, y), append(ca, cx), append(cz, cy)
		ratios = append(ratios, float64(x)/float64(y))
		if cy > 0 {
			cpuRatios = append(cpuRatios, float64(cx)/float64(cy))
		}
	}
	ma, mz := median(da), median(dz)
	b.ReportMetric(float64(ma.Microseconds()), "sharded-µs")
	b.ReportMetric(float64(mz.Microseconds()), "unsharded-µs")
	b.ReportMetric(50/ma.Seconds(), "sharded-rows/s")
	b.ReportMetric(50/mz.Seconds(), "unsharded-rows/s")
	b.ReportMetric(float64(median(ca).Microseconds()), "sharded-cpu-µs")
	b.ReportMetric(float64(median(cz).Microseconds()), "unsharded-cpu-µs")
	b.ReportMetric(median(ratios), "ratio-median")
	if len(cpuRatios) > 0 {
		b.ReportMetric(median(cpuRatios), "cpu-ratio-median")
	}
}

func median[T cmp.Ordered](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
