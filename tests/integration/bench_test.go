package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/tests/testdb"
)

// BenchmarkPostgresSegments compares the segment chain with the
// single-segment generator on a real PostgreSQL store, with 1 and 8
// goroutines: the chain's prefetching hides the store's round trips, the
// single segment waits for one on every step-th ID.
//
//	go test -run '^$' -bench BenchmarkPostgresSegments -benchmem ./tests/integration/
func BenchmarkPostgresSegments(b *testing.B) {
	ctx := context.Background()
	d := testdb.Postgres(b)
	st, err := sqlstore.Open(ctx, d.Open(b), sqlstore.Settings{CreateTables: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const step = 1000
	kinds := []struct {
		name string
		new  func(segment.Distributor) (engine.Generator, error)
	}{
		{"chain", func(d segment.Distributor) (engine.Generator, error) {
			return chain.New(d, segment.Settings{Step: step}, chain.Owned{})
		}},
		{"segment", func(d segment.Distributor) (engine.Generator, error) {
			return chain.NewSingle(d, segment.Settings{Step: step}, chain.Owned{})
		}},
	}
	for _, k := range kinds {
		for _, workers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s-p%d", k.name, workers), func(b *testing.B) {
				dist, err := st.Segment(fmt.Sprintf("bench_%s_%d", k.name, workers))
				if err != nil {
					b.Fatal(err)
				}
				g, err := k.new(dist)
				if err != nil {
					b.Fatal(err)
				}
				if c, ok := g.(interface{ Close() error }); ok {
					defer c.Close()
				}
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range workers {
					n := b.N / workers
					if w < b.N%workers {
						n++
					}
					wg.Go(func() {
						for range n {
							if _, err := g.NextID(ctx); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}
