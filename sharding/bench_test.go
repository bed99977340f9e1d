package sharding

import (
	"fmt"
	"testing"

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
)

func BenchmarkRoute(b *testing.B) {
	mod := func(cfg Mod) *Router {
		r, err := NewMod(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	interval, err := NewInterval(Interval{Layout: snowflake.Default, Table: "order_{200601}"})
	if err != nil {
		b.Fatal(err)
	}
	id0, _ := snowlayout.Compose(snowflake.Default, start, 1, 0)
	for _, c := range []struct {
		name string
		r    *Router
	}{
		{"mod-default", mod(Mod{Databases: "ds_{0..3}", Tables: "t_{0..7}"})},
		{"mod-rule", mod(Mod{Databases: "m{0..1}", Tables: "course_{1..2}", TableRule: "(id+1)%4/2+1"})},
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
