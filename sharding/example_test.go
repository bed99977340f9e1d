package sharding_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/sharding"
)

// ShardingSphere's course example: two databases m0 and m1 with tables
// course_1 and course_2, db = id % 2 and table = ((id+1) % 4)/2 + 1.
func Example() {
	r, err := sharding.NewMod(sharding.Mod{
		Databases: "m{0..1}", Tables: "course_{1..2}",
		TableRule: "(id+1)%4/2+1",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r)
	for id := int64(100); id < 104; id++ {
		s, _ := r.Route(id)
		fmt.Println(id, "→", s)
	}
	// Output:
	// m{id%2}.course_{(id+1)%4/2+1}
	// 100 → m0.course_1
	// 101 → m1.course_2
	// 102 → m0.course_2
	// 103 → m1.course_1
}

// One insert per millisecond, as when each waits on a remote database: a
// snowflake that resets its sequence on every tick sends every row to one
// shard; idforge's fills all four.
func ExampleMeasure() {
	r, _ := sharding.NewMod(sharding.Mod{
		Databases: "m{0..1}", Tables: "course_{1..2}",
		TableRule: "(id+1)%4/2+1",
	})
	shards, _ := r.Shards()
	plain := snowflake.Default
	plain.SequenceResetThreshold = -1
	for _, layout := range []snowflake.Layout{plain, snowflake.Default} {
		fake := clocktest.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
		g, _ := snowflake.New(1, snowflake.Settings{Layout: layout, Clock: fake})
		counts := map[string]int{}
		for _, s := range shards {
			counts[s.String()] = 0 // empty shards count too
		}
		for range 1000 {
			id, _ := g.NextID(context.Background())
			s, _ := r.Route(id)
			counts[s.String()]++
			fake.Advance(time.Millisecond)
		}
		maxMin, p := sharding.Measure(counts)
		fmt.Println(counts)
		fmt.Printf("max/min %.2f, p %.3f\n", maxMin, p)
	}
	// Output:
	// map[m0.course_1:1000 m0.course_2:0 m1.course_1:0 m1.course_2:0]
	// max/min +Inf, p 0.000
	// map[m0.course_1:250 m0.course_2:250 m1.course_1:250 m1.course_2:250]
	// max/min 1.00, p 1.000
}

// Monthly order tables named by the time inside each snowflake ID.
func ExampleNewInterval() {
	r, err := sharding.NewInterval(sharding.Interval{Layout: snowflake.Default, Table: "order_{200601}"})
	if err != nil {
		log.Fatal(err)
	}
	// An ID made on 2026-11-21 (a fake clock stands in for the system's).
	gen, _ := snowflake.New(1, snowflake.Settings{Clock: clocktest.NewFake(time.Date(2026, 11, 21, 13, 17, 30, 0, time.UTC))})
	id, _ := gen.NextID(context.Background())
	s, _ := r.Route(id)
	fmt.Println(s.TableName)
	tables, _ := r.Tables(time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(tables)
	// Output:
	// order_202611
	// [order_202611 order_202612 order_202701]
}
