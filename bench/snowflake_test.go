package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bwmarrin "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
)

// limit12 is the most a 12-bit-sequence millisecond layout can issue per second.
const limit12 = 4096 * 1000

// run calls next b.N times, on one goroutine or on GOMAXPROCS goroutines, and
// reports IDs per second and the share of limit (IDs per second the layout
// allows; 0 for none) that reached.
func run(b *testing.B, parallel bool, limit float64, next func() error) {
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := next(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if err := next(); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRate(b, limit)
}

// reportRate reports IDs per second and, for limit > 0, its share of limit.
func reportRate(b *testing.B, limit float64) {
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "ids/s")
	if limit > 0 {
		b.ReportMetric(100*rate/limit, "%limit")
	}
}

// both runs f as name and as name-parallel.
func both(b *testing.B, name string, f func(b *testing.B, parallel bool)) {
	b.Run(name, func(b *testing.B) { f(b, false) })
	b.Run(name+"-parallel", func(b *testing.B) { f(b, true) })
}

// BenchmarkSnowflake compares generators at their layout's limit: each
// spends most of a millisecond waiting for the next one once its 4096 IDs
// are issued (sonyflake: 256 IDs per 10 ms).
func BenchmarkSnowflake(b *testing.B) {
	ctx := context.Background()
	both(b, "idforge", func(b *testing.B, parallel bool) {
		g, err := snowflake.New(1)
		if err != nil {
			b.Fatal(err)
		}
		run(b, parallel, limit12, func() error { _, err := g.NextID(ctx); return err })
	})
	both(b, "bwmarrin", func(b *testing.B, parallel bool) {
		n, err := bwmarrin.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		run(b, parallel, limit12, func() error { n.Generate(); return nil })
	})
	both(b, "sonyflake", func(b *testing.B, parallel bool) {
		sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
		if err != nil {
			b.Fatal(err)
		}
		run(b, parallel, 256*100, func() error { _, err := sf.NextID(); return err })
	})
	both(b, "mutex-baseline", func(b *testing.B, parallel bool) {
		m := &mutexBaseline{machine: 1}
		run(b, parallel, limit12, func() error { m.next(); return nil })
	})
}

// mutexBaseline is the simplest correct snowflake, as a yardstick: one mutex,
// time.Now on every ID, sequence reset on every millisecond, 41/10/12 bits.
type mutexBaseline struct {
	mu        sync.Mutex
	machine   int64
	lastMilli int64
	seq       int64
}

func (m *mutexBaseline) next() int64 {
	const epoch = 1577203200000
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now().UnixMilli() - epoch
	if now > m.lastMilli {
		m.seq = 0
	} else if m.seq = (m.seq + 1) & 4095; m.seq == 0 {
		for now <= m.lastMilli {
			now = time.Now().UnixMilli() - epoch
		}
	}
	m.lastMilli = now
	return now<<22 | m.machine<<12 | m.seq
}

// wide has 2^22 IDs per millisecond and no machine bits: a tick boundary is
// never waited for, so the per-ID cost of the generator itself shows.
var wide = snowflake.Layout{
	Epoch: snowflake.Default.Epoch, TimestampBits: 41, MachineBits: 0, SequenceBits: 22, Unit: time.Millisecond,
}

// BenchmarkWideSequence compares idforge on the wide layout with a cached
// clock against a bare atomic.Int64.Add, the floor for any shared counter.
// The loops are written out, not passed to run as closures, so the call
// overhead does not flatter the ratio.
func BenchmarkWideSequence(b *testing.B) {
	ctx := context.Background()
	idforge := func(b *testing.B) *snowflake.Generator {
		c := newCached(time.Millisecond)
		b.Cleanup(c.close)
		g, err := snowflake.New(0, snowflake.Settings{Layout: wide, Clock: c})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		return g
	}
	b.Run("idforge", func(b *testing.B) {
		g := idforge(b)
		for b.Loop() {
			if _, err := g.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, 0)
	})
	b.Run("idforge-parallel", func(b *testing.B) {
		g := idforge(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.NextID(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b, 0)
	})
	b.Run("atomic", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			n.Add(1)
		}
		reportRate(b, 0)
	})
	b.Run("atomic-parallel", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
		reportRate(b, 0)
	})
}

// cached is a clock read from the system clock once per resolution by a
// goroutine, so the generator's read costs one atomic load: what idforge's
// engine uses for its own benchmark of the widest layouts. The generator
// reads it through UnixNano.
type cached struct {
	now  atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func newCached(resolution time.Duration) *cached {
	c := &cached{stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(time.Now().UnixNano())
	go func() {
		defer close(c.done)
		t := time.NewTicker(resolution)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.now.Store(time.Now().UnixNano())
			}
		}
	}()
	return c
}

func (c *cached) Now() time.Time { return time.Unix(0, c.now.Load()) }

func (c *cached) UnixNano() int64 { return c.now.Load() }

func (c *cached) Sleep(ctx context.Context, d time.Duration) error { return clock.System.Sleep(ctx, d) }

func (c *cached) close() {
	close(c.stop)
	<-c.done
}
