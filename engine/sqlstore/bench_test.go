package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// BenchmarkNextMaxID measures one segment fetch (one statement) per
// database, from one goroutine and from GOMAXPROCS goroutines sharing a
// pool and the sequence's row.
func BenchmarkNextMaxID(b *testing.B) {
	ctx := context.Background()
	for _, d := range testdb.All(b) {
		s := openStore(b, d, sqlstore.Settings{CreateTables: true})
		seg, err := s.Segment("bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(d.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := seg.NextMaxID(ctx, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.Name+"-parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := seg.NextMaxID(ctx, 100); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDistributeSelf measures a restarting instance getting its own
// machine ID back, the common case of Distribute.
func BenchmarkDistributeSelf(b *testing.B) {
	ctx := context.Background()
	inst := machine.Instance{Namespace: "bench", ID: "10.0.0.1:8080"}
	for _, d := range testdb.All(b) {
		m := openStore(b, d, sqlstore.Settings{CreateTables: true})
		b.Run(d.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Distribute(ctx, inst, 10, 5*time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
