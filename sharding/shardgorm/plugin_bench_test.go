package shardgorm_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardgorm"
)

// TestPluginPairedBench times a routed First and a Create through the
// plugin, through the repository over the same shards, and on one plain
// table (and, for First, on the shard's table named by hand), taking
// turns in one loop so that the host's drift reaches all alike, and logs
// the medians. It measures and asserts nothing
// about time, and runs only with IDFORGE_PAIRED_BENCH set to the number
// of rounds:
//
//	IDFORGE_PAIRED_BENCH=2000 go test -count=1 -run PluginPairedBench -v ./sharding/shardgorm/
func TestPluginPairedBench(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("IDFORGE_PAIRED_BENCH"))
	if rounds <= 0 {
		t.Skip("set IDFORGE_PAIRED_BENCH to a number of rounds")
	}
	for _, b := range shardtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			repo, err := shardgorm.New(e.dbs, e.router, e.settings.Settings)
			if err != nil {
				t.Fatal(err)
			}
			one := openGorm(t, e.dsn[1], shardtest.OwnerRegistry(t))
			if err := one.AutoMigrate(&Order{}); err != nil {
				t.Fatal(err)
			}
			seed := orders(64)
			for i := range seed {
				seed[i].Items = nil
			}
			plain := slices.Clone(seed)
			if err := e.db.Create(&seed).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Create(&plain).Error; err != nil {
				t.Fatal(err)
			}
			type op struct {
				name string
				run  func(i int) error
			}
			ops := []op{
				{"First plugin", func(i int) error { var o Order; return e.db.First(&o, seed[i%len(seed)].ID).Error }},
				{"First repository", func(i int) error {
					var os []Order
					return repo.Get(ctx, []int64{seed[i%len(seed)].ID}, &os)
				}},
				{"First one table", func(i int) error { var o Order; return one.First(&o, plain[i%len(plain)].ID).Error }},
				{"First shard direct", func(i int) error {
					o := seed[i%len(seed)]
					s, _ := e.router.Route(o.ID)
					var got Order
					return e.dbs[s.Database].Table("orders_"+s.TableName[len("orders_"):]).First(&got, o.ID).Error
				}},
				{"Create plugin", func(i int) error { return e.db.Create(&Order{UserID: int64(i%5 + 1), Amount: 1}).Error }},
				{"Create repository", func(i int) error { return repo.Create(ctx, &Order{UserID: int64(i%5 + 1), Amount: 1}) }},
				{"Create one table", func(i int) error { return one.Create(&Order{UserID: int64(i%5 + 1), Amount: 1}).Error }},
			}
			took := make([][]time.Duration, len(ops))
			order := rand.New(rand.NewPCG(1, 2)) // the same shuffles every run
			for i := range rounds {
				// Each round runs the ops in another order: a read after a
				// write to its database pays for the write (SQLite drops
				// its page cache), and no op should always follow the same.
				for _, j := range order.Perm(len(ops)) {
					start := time.Now()
					if err := ops[j].run(i); err != nil {
						t.Fatalf("%s: %v", ops[j].name, err)
					}
					took[j] = append(took[j], time.Since(start))
				}
			}
			for j, o := range ops {
				slices.Sort(took[j])
				t.Logf("%-18s median %8s  p90 %8s  (%d rounds)", o.name, took[j][len(took[j])/2], took[j][len(took[j])*9/10], rounds)
			}
		})
	}
}
