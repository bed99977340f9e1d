package integration

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/tests/testdb"
)

// BenchmarkLeaseProtection is the cost per ID of the default lease
// protection: snowflake NextID through idforge.New with default options
// (reservation on, 1 s ahead, a heartbeat every 250 ms that also writes the
// local state file of a fixed machine ID) next to the same registry with
// no reservation (a negative RideThrough), on a fixed machine ID (machine.Manual, a state file
// in a temporary directory) and on a redisstore store of the benchmark's own
// Redis. Serial and parallel (GOMAXPROCS goroutines). The default layout
// issues at most 4,096 IDs per millisecond, about 244 ns an ID, which is
// the floor of every serial figure.
//
//	go test -run '^$' -bench BenchmarkLeaseProtection -benchmem ./tests/integration/
func BenchmarkLeaseProtection(b *testing.B) {
	ctx := context.Background()
	var store idforge.Store // opened on first use: it waits a 2 s reset grace
	top := b                // the server and client outlive each sub-benchmark
	redisStore := func() idforge.Store {
		if store == nil {
			b := top
			srv := testdb.StartRedisServer(b, testdb.RedisVolatile()...)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			b.Cleanup(func() { c.Close() })
			st, err := redisstore.Open(ctx, c, redisstore.Settings{AllowVolatile: true})
			if err != nil {
				b.Fatal(err)
			}
			store = st
		}
		return store
	}
	for _, dist := range []string{"manual", "redis"} {
		for _, prot := range []struct {
			name    string
			reserve int64
		}{{"default", 0}, {"reservation-off", -1}} {
			for _, par := range []bool{false, true} {
				name := dist + "/" + prot.name
				if par {
					name += "/parallel"
				}
				b.Run(name, func(b *testing.B) {
					set := idforge.Settings{Namespace: testdb.UniqueName("bench-"), Logger: quiet}
					if dist == "manual" {
						set.Machine, set.StateDir = machine.Manual(fixedMachineID), b.TempDir()
						if prot.reserve != 0 {
							set.Machine = noReservation{set.Machine}
						}
					} else {
						set.Store = redisStore()
						if prot.reserve != 0 {
							set.Store = noReservationStore{graceHidden{set.Store}}
						}
					}
					reg, err := idforge.New(ctx, set)
					if err != nil {
						b.Fatal(err)
					}
					defer reg.Close()
					sf, err := reg.Generator(ctx, "snowflake", "")
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					if par {
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if _, err := sf.NextID(ctx); err != nil {
									b.Error(err)
									return
								}
							}
						})
						return
					}
					for b.Loop() {
						if _, err := sf.NextID(ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// noReservationStore is a store whose ride-through window is none, its
// grace hidden (the lease without reservation would outlive it).
type noReservationStore struct{ graceHidden }

// Terms are the store's with no window (and no grace, as graceHidden's).
func (n noReservationStore) Terms() machine.Terms {
	t := n.graceHidden.Terms()
	t.RideThrough = -1
	return t
}
