package sharding

import (
	"fmt"
	"testing"

	"github.com/idforge/idforge/engine/snowflake"
)

func BenchmarkRoute(b *testing.B) {
	mod := func(cfg Mod) Router {
		r, err := NewMod(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	interval, err := NewInterval(Interval{Layout: snowflake.Default, Period: Monthly, Prefix: "order_"})
	if err != nil {
		b.Fatal(err)
	}
	id0, _ := snowflake.Default.Compose(start, 1, 0)
	for _, c := range []struct {
		name string
		r    Router
	}{
		{"mod-default", mod(Mod{Databases: 4, Tables: 8, TablePattern: "t_%d"})},
		{"mod-expr", mod(Mod{Databases: 2, Tables: 2, TablePattern: "course_%d", TableRule: ID().Add(1).Mod(4).Div(2)})},
		{"mod-func", mod(Mod{Databases: 2, Tables: 2, TablePattern: "course_%d",
			TableRule: RuleFunc(func(id int64) int64 { return (id + 1) % 4 / 2 })})},
		{"interval-monthly", interval},
	} {
		b.Run(c.name, func(b *testing.B) {
			id := id0
			for b.Loop() {
				if _, err := c.r.Route(id); err != nil {
					b.Fatal(err)
				}
				id++
			}
		})
	}
}

func BenchmarkMeasure1024(b *testing.B) {
	counts := make(map[string]int, 1024)
	for i := range 1024 {
		counts[fmt.Sprintf("t_%d", i)] = 100 + i%7
	}
	for b.Loop() {
		Measure(counts)
	}
}
