package chain_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

// storeLatency is how long the fake store takes to answer in BenchmarkNextID.
const storeLatency = time.Millisecond

// maxSamples caps the timed pass that measures per-call latency.
const maxSamples = 1 << 21

// BenchmarkNextID compares, side by side, a bare atomic.Int64.Add, the
// segment chain, the single-segment generator and a Leaf-style double buffer
// (leaf_test.go), each on its own fake store answering after 1 ms, all with
// the default step. Sub-benchmarks without a suffix run on one goroutine;
// -p2 and -p8 run on exactly 2 and 8 goroutines (not GOMAXPROCS multiples as
// RunParallel would), splitting b.N between them, so ns/op is wall time per
// ID for the whole group.
//
// Every variant is called the way the library calls a generator: through
// the engine.Generator interface (the registry, the GORM plugin and sqlhook
// hold one). The atomic baseline is a type whose NextID is the bare
// atomic.Int64.Add, so both sides pay the same interface call and the
// difference is the chain's own work. (Calling c.NextID as a method value
// instead adds a compiler-made wrapper frame to the chain only, since NextID
// is too big to inline into it, while the atomic closure has none.)
//
// ns/op comes from a plain loop. A second, timed pass (excluded from ns/op)
// records every call's latency and reports p99-ns, p999-ns and p9999-ns, and
// the store calls per million IDs (fetches/1e6ids) over both passes. The
// chain also reports its prefetch distance at the end and how many calls of
// the round found nothing ready (hungry).
//
// Each generator lives across the framework's b.N rounds, like one in a
// long-running service: the reported (last, longest) round sees the chain's
// prefetch distance already widened by the earlier, short rounds.
func BenchmarkNextID(b *testing.B) {
	for _, goroutines := range []int{1, 2, 8} {
		suffix := ""
		if goroutines > 1 {
			suffix = fmt.Sprintf("-p%d", goroutines)
		}
		a := new(atomicGen)
		b.Run("atomic"+suffix, func(b *testing.B) { benchNextID(b, goroutines, a, nil) })

		store := slowFake(storeLatency)
		c, err := chain.New(store, segment.Settings{}, chain.Owned{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("chain"+suffix, func(b *testing.B) {
			before := c.Stats()
			benchNextID(b, goroutines, c, store)
			after := c.Stats()
			b.ReportMetric(float64(after.PrefetchDistance), "distance")
			b.ReportMetric(float64(after.Hungry-before.Hungry), "hungry")
		})
		c.Close()

		store = slowFake(storeLatency)
		g, err := chain.NewPlainSingle(store)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("segment"+suffix, func(b *testing.B) { benchNextID(b, goroutines, g, store) })

		store = slowFake(storeLatency)
		db := newDoubleBuffer(store, 1000)
		b.Run("doublebuffer"+suffix, func(b *testing.B) { benchNextID(b, goroutines, db, store) })
		db.Close()
	}
	store := slowFake(storeLatency)
	c, err := chain.New(store, segment.Settings{}, chain.Owned{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("paired", func(b *testing.B) { benchPaired(b, c) })
	c.Close()
}

// benchPaired measures the chain against the atomic baseline on one
// goroutine in alternating chunks of 32,768 IDs (which of the two goes first
// alternates too), so a change in the machine's load hits both alike. One
// op is one ID from each. Like the others, the chain lives across the
// framework's rounds. It reports each side's ns per ID, the chain's
// speed as a fraction of the atomic's (atomic ns / chain ns) over the whole
// round, and the median of that fraction over the chunks.
func benchPaired(b *testing.B, c *chain.Chain) {
	before := c.Stats()
	gens := [2]engine.Generator{new(atomicGen), c}
	ctx := context.Background()
	const chunk = 1 << 15
	var total [2]time.Duration
	var ratios []float64
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; i++ {
		n := min(chunk, b.N-done)
		var t [2]time.Duration
		for k := range 2 {
			j := (i + k) % 2
			g := gens[j]
			start := time.Now()
			for range n {
				if _, err := g.NextID(ctx); err != nil {
					b.Fatal(err)
				}
			}
			t[j] = time.Since(start)
		}
		total[0] += t[0]
		total[1] += t[1]
		if n == chunk && t[1] > 0 {
			ratios = append(ratios, float64(t[0])/float64(t[1]))
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(c.Stats().Hungry-before.Hungry), "hungry")
	b.ReportMetric(float64(total[0])/float64(b.N), "atomic-ns/id")
	b.ReportMetric(float64(total[1])/float64(b.N), "chain-ns/id")
	if total[1] > 0 {
		b.ReportMetric(float64(total[0])/float64(total[1]), "chain/atomic-speed")
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "median-chunk-speed")
	}
}

// atomicGen is the baseline: a bare atomic.Int64.Add behind engine.Generator.
type atomicGen struct{ n atomic.Int64 }

// NextID returns the next value of the counter.
func (a *atomicGen) NextID(context.Context) (int64, error) { return a.n.Add(1), nil }

// benchNextID runs gen.NextID b.N times on goroutines goroutines for ns/op, then a
// timed pass for the latency percentiles.
func benchNextID(b *testing.B, goroutines int, gen engine.Generator, store *segtest.Fake) {
	ctx := context.Background()
	var calls int64
	if store != nil {
		calls = store.Calls()
	}
	var firstErr atomic.Pointer[error]
	fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }

	b.ResetTimer()
	split(goroutines, b.N, func(_, n int) {
		for range n {
			if _, err := gen.NextID(ctx); err != nil {
				fail(err)
				return
			}
		}
	})
	b.StopTimer()

	samples := min(b.N, maxSamples)
	hists := make([]histogram, goroutines)
	split(goroutines, samples, func(g, n int) {
		h := &hists[g]
		for range n {
			start := time.Now()
			_, err := gen.NextID(ctx)
			h.record(time.Since(start).Nanoseconds())
			if err != nil {
				fail(err)
				return
			}
		}
	})
	if err := firstErr.Load(); err != nil {
		b.Fatal(*err)
	}
	for i := 1; i < goroutines; i++ {
		hists[0].merge(&hists[i])
	}
	b.ReportMetric(float64(hists[0].quantile(0.99)), "p99-ns")
	b.ReportMetric(float64(hists[0].quantile(0.999)), "p999-ns")
	b.ReportMetric(float64(hists[0].quantile(0.9999)), "p9999-ns")
	if store != nil {
		b.ReportMetric(float64(store.Calls()-calls)*1e6/float64(b.N+samples), "fetches/1e6ids")
	}
}

// split runs f on goroutines goroutines sharing n iterations, starting them
// together; one goroutine runs on the caller's.
func split(goroutines, n int, f func(g, n int)) {
	if goroutines == 1 {
		f(0, n)
		return
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		share := n / goroutines
		if g < n%goroutines {
			share++
		}
		wg.Go(func() {
			<-start
			f(g, share)
		})
	}
	close(start)
	wg.Wait()
}
