package snowflake

import (
	"context"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/internal/timebase"
)

// wide never waits for a tick in practice: 2^22 IDs per millisecond.
var wide = Layout{Epoch: defaultEpoch, TimestampBits: 41, MachineBits: 0, SequenceBits: 22, Unit: time.Millisecond}

func benchNextID(b *testing.B, g *Generator, parallel bool) {
	ctx := context.Background()
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.NextID(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if _, err := g.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

func BenchmarkNextID(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		suffix := ""
		if parallel {
			suffix = "-parallel"
		}
		b.Run("default"+suffix, func(b *testing.B) {
			benchNextID(b, newGen(b, 1), parallel)
		})
		b.Run("wide-cached"+suffix, func(b *testing.B) {
			c := timebase.NewCached(time.Millisecond)
			defer c.Close()
			benchNextID(b, newGen(b, 0, Settings{Layout: wide, Clock: c}), parallel)
		})
	}
}
