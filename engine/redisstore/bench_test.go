package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/tests/testdb"
)

// benchStore is a store on the test Redis whose client counts commands, so
// every benchmark also reports its round trips per operation.
func benchStore(b *testing.B, opts ...redisstore.Settings) (*redisstore.Store, *commandCounter) {
	b.Helper()
	client, prefix := testdb.Redis(b)
	counter := &commandCounter{}
	client.AddHook(counter)
	s, err := redisstore.Open(context.Background(), client, with(testOptions(prefix), opts...))
	if err != nil {
		b.Fatal(err)
	}
	return s, counter
}

func reportTrips(b *testing.B, counter *commandCounter) {
	b.ReportMetric(float64(len(counter.take()))/float64(b.N), "trips/op")
}

// BenchmarkSegmentNextMaxID is one segment fetch: one script that checks
// the epoch, raises the counter to the floor and advances it.
func BenchmarkSegmentNextMaxID(b *testing.B) {
	for _, bc := range []struct {
		name  string
		start int64
	}{{"start=0", 0}, {"start=1000", 1000}} {
		b.Run(bc.name, func(b *testing.B) {
			s, counter := benchStore(b, redisstore.Settings{Start: bc.start})
			d := segmentOf(b, s, "bench")
			ctx := context.Background()
			counter.take()
			for b.Loop() {
				if _, err := d.NextMaxID(ctx, 1000); err != nil {
					b.Fatal(err)
				}
			}
			reportTrips(b, counter)
		})
	}
}

// BenchmarkMachine measures a restart's Distribute (reusing its own ID in a
// namespace of 64 held IDs) and a heartbeat's Guard.
func BenchmarkMachine(b *testing.B) {
	s, counter := benchStore(b)
	d := s
	ctx := context.Background()
	var st machine.State
	for i := range 64 {
		var err error
		st, err = d.Distribute(ctx, machine.Instance{Namespace: "bench", ID: string(rune('A' + i))}, 10, 5*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
	}
	last := machine.Instance{Namespace: "bench", ID: string(rune('A' + 63))}
	b.Run("distribute-self", func(b *testing.B) {
		counter.take()
		for b.Loop() {
			if _, err := d.Distribute(ctx, last, 10, 5*time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		reportTrips(b, counter)
	})
	b.Run("guard", func(b *testing.B) {
		counter.take()
		for b.Loop() {
			if err := d.Guard(ctx, last, st); err != nil {
				b.Fatal(err)
			}
		}
		reportTrips(b, counter)
	})
}
