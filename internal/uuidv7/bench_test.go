package uuidv7_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/internal/uuidv7"
)

var sink [16]byte

// BenchmarkNewV7 sets this generator beside google/uuid's NewV7, which
// also takes 12 bits of sub-millisecond time and 16 bytes of crypto/rand:
//
//	go test -run '^$' -bench NewV7 -benchmem -count 3 ./engine/uuidv7
//
// "idforge" and "google" give each one's ns and allocations per UUID;
// "paired" draws them in alternating chunks of 4,096 UUIDs on one
// goroutine (which goes first alternates too), so that the machine's load
// hits both alike, and reports each side's ns per UUID, idforge's speed as
// a fraction of google's over the round and the median of that fraction
// over the chunks.
func BenchmarkNewV7(b *testing.B) {
	ctx := context.Background()
	g := uuidv7.New(nil)
	gens := [2]func() [16]byte{
		func() [16]byte { u, _ := g.NextUUID(ctx); return u },
		func() [16]byte { u, _ := uuid.NewV7(); return u },
	}
	b.Run("idforge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = gens[0]()
		}
	})
	b.Run("google", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = gens[1]()
		}
	})
	b.Run("paired", func(b *testing.B) {
		b.ReportAllocs()
		const chunk = 1 << 12
		var total [2]time.Duration
		var ratios []float64
		for done, i := 0, 0; done < b.N; i++ {
			n := min(chunk, b.N-done)
			var t [2]time.Duration
			for k := range 2 {
				j := (i + k) % 2
				start := time.Now()
				for range n {
					sink = gens[j]()
				}
				t[j] = time.Since(start)
			}
			total[0] += t[0]
			total[1] += t[1]
			if n == chunk && t[0] > 0 {
				ratios = append(ratios, float64(t[1])/float64(t[0]))
			}
			done += n
		}
		b.ReportMetric(float64(total[0])/float64(b.N), "idforge-ns/uuid")
		b.ReportMetric(float64(total[1])/float64(b.N), "google-ns/uuid")
		if total[0] > 0 {
			b.ReportMetric(float64(total[1])/float64(total[0]), "idforge/google-speed")
		}
		if len(ratios) > 0 {
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-chunk-speed")
		}
	})
}
