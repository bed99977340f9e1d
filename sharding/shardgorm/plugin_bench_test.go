package shardgorm_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardgorm"
)

// BenchmarkPlugin times a routed First and a Create through the plugin,
// through the repository over the same shards and on one plain table (and,
// for First, on the shard's table named by hand). The paired run takes
// every op once per iteration in a shuffled order, so that the host's
// drift reaches all alike and no op always follows a write to its
// database, and reports each op's median and the plugin's median ratios;
// the per-op runs report allocations:
//
//	IDFORGE_REQUIRE_SERVERS=1 go test -run '^$' -bench BenchmarkPlugin -benchmem -benchtime 2000x ./sharding/shardgorm/
func BenchmarkPlugin(b *testing.B) {
	for _, be := range shardtest.Backends {
		b.Run(be.Name, func(b *testing.B) {
			ops := pluginBenchOps(b, be)
			b.Run("paired", func(b *testing.B) {
				took := make([][]time.Duration, len(ops))
				order := rand.New(rand.NewPCG(1, 2)) // the same shuffles every run
				i := 0
				for b.Loop() {
					for _, j := range order.Perm(len(ops)) {
						start := time.Now()
						if err := ops[j].run(i); err != nil {
							b.Fatalf("%s: %v", ops[j].name, err)
						}
						took[j] = append(took[j], time.Since(start))
					}
					i++
				}
				med := make(map[string]time.Duration, len(ops))
				for j, o := range ops {
					slices.Sort(took[j])
					med[o.name] = took[j][len(took[j])/2]
					b.ReportMetric(float64(med[o.name].Microseconds()), o.name+"-µs")
				}
				for _, verb := range []string{"First", "Create"} {
					p := float64(med[verb+"/plugin"])
					b.ReportMetric(p/float64(med[verb+"/repository"]), verb+"-plugin/repository")
					b.ReportMetric(p/float64(med[verb+"/one-table"]), verb+"-plugin/one-table")
				}
			})
			for _, o := range ops {
				b.Run(o.name, func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if err := o.run(i); err != nil {
							b.Fatalf("%s: %v", o.name, err)
						}
						i++
					}
				})
			}
		})
	}
}

// benchOp is one operation of BenchmarkPlugin; i varies its row.
type benchOp struct {
	name string
	run  func(i int) error
}

// pluginBenchOps sets up two databases × two tables with the plugin, a
// repository over the same shards and one plain table, each holding 64
// orders, and returns the ops BenchmarkPlugin times.
func pluginBenchOps(b *testing.B, be shardtest.Backend) []benchOp {
	ctx := context.Background()
	e := newPluginEnv(b, be, shardgorm.PluginSettings{})
	repo, err := shardgorm.New(e.dbs, e.router, e.settings.Settings)
	if err != nil {
		b.Fatal(err)
	}
	one := openGorm(b, e.dsn[1], shardtest.OwnerRegistry(b))
	if err := one.AutoMigrate(&Order{}); err != nil {
		b.Fatal(err)
	}
	seed := orders(64)
	for i := range seed {
		seed[i].Items = nil
	}
	plain := slices.Clone(seed)
	if err := e.db.Create(&seed).Error; err != nil {
		b.Fatal(err)
	}
	if err := one.Create(&plain).Error; err != nil {
		b.Fatal(err)
	}
	return []benchOp{
		{"First/plugin", func(i int) error { var o Order; return e.db.First(&o, seed[i%len(seed)].ID).Error }},
		{"First/repository", func(i int) error {
			var os []Order
			return repo.Get(ctx, []int64{seed[i%len(seed)].ID}, &os)
		}},
		{"First/one-table", func(i int) error { var o Order; return one.First(&o, plain[i%len(plain)].ID).Error }},
		{"First/shard-direct", func(i int) error {
			o := seed[i%len(seed)]
			s, _ := e.router.Route(o.ID)
			var got Order
			return e.dbs[s.Database].Table("orders_"+s.TableName[len("orders_"):]).First(&got, o.ID).Error
		}},
		{"Create/plugin", func(i int) error { return e.db.Create(&Order{UserID: int64(i%5 + 1), Amount: 1}).Error }},
		{"Create/repository", func(i int) error { return repo.Create(ctx, &Order{UserID: int64(i%5 + 1), Amount: 1}) }},
		{"Create/one-table", func(i int) error { return one.Create(&Order{UserID: int64(i%5 + 1), Amount: 1}).Error }},
	}
}
