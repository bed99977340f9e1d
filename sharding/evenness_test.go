package sharding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
)

// The proof that idforge's snowflake IDs spread evenly over id % N shards at
// any traffic, and that a per-tick reset does not. Traffic is simulated with
// a fake clock: it moves 1/rate seconds between IDs, or not at all under
// saturation, where the generator uses up each tick's sequence and waits for
// the next tick by sleeping on the fake clock (which advances it).

var shardCounts = []int64{2, 3, 4, 5, 8, 16, 1024}

type traffic struct {
	name      string
	perSecond int // 0: saturation, the clock moves only when the generator sleeps
}

var traffics = []traffic{{"1/s", 1}, {"10/s", 10}, {"1000/s", 1000}, {"100000/s", 100000}, {"saturation", 0}}

var start = time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)

// idsFor returns how many IDs a run over n shards draws. For 1024 shards
// 10,000 IDs average 9.8 per shard, so whole-number counts force max/min to
// at least 10/9 whatever the generator does; 102,400 IDs give 100 per shard.
func idsFor(n int64) int {
	if n == 1024 {
		return 102400
	}
	return 10000
}

// generate draws count IDs from a generator with layout on a fake clock
// moving at the given traffic; a non-nil rng draws exponential gaps (random
// arrivals) with the same mean instead of steady ones.
func generate(t *testing.T, layout snowflake.Layout, count int, tr traffic, rng *rand.Rand) ([]int64, *clocktest.Fake) {
	t.Helper()
	fc := clocktest.NewFake(start)
	g, err := snowflake.New(1, snowflake.Settings{Layout: layout, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := make([]int64, count)
	gap := time.Duration(0)
	if tr.perSecond > 0 {
		gap = time.Second / time.Duration(tr.perSecond)
	}
	for i := range ids {
		if ids[i], err = g.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if i > 0 && ids[i] <= ids[i-1] {
			t.Fatalf("id %d = %d not above %d", i, ids[i], ids[i-1])
		}
		switch {
		case rng != nil:
			fc.Advance(time.Duration(rng.ExpFloat64() * float64(gap)))
		case gap > 0:
			fc.Advance(gap)
		}
	}
	return ids, fc
}

func modStats(ids []int64, n int64) Stats {
	counts := make([]int, n)
	for _, id := range ids {
		counts[id%n]++
	}
	return MeasureSlice(counts)
}

func nonEmpty(s Stats) int {
	k := 0
	for _, c := range s.Counts {
		if c > 0 {
			k++
		}
	}
	return k
}

// plainLayout resets the sequence on every tick, as Twitter's snowflake,
// bwmarrin/snowflake and ShardingSphere's SNOWFLAKE do.
func plainLayout() snowflake.Layout {
	l := snowflake.Default
	l.SequenceResetThreshold = -1
	return l
}

// The one cell of the grid where the default layout misses 1.05, with the
// mechanism the test below checks. No sequence rule fixes it without breaking
// the powers of two: any step other than +1 between consecutive IDs leaves
// residues mod 2^k unvisited at some regular rate.
var knownSkew = map[string]string{
	"5/1000/s": "one ID per millisecond: consecutive IDs differ by 2^22+1 = 5 × 838,861, so id % 5 " +
		"stays put until the sequence wraps (every 2,048 IDs)",
}

func TestEvennessIdforgeSnowflake(t *testing.T) {
	for _, tr := range traffics {
		ids, fc := generate(t, snowflake.Default, idsFor(1024), tr, nil)
		if tr.perSecond == 0 && fc.Sleeps() == 0 {
			t.Errorf("saturation: the generator never waited for a tick on the fake clock")
		}
		for _, n := range shardCounts {
			s := modStats(ids[:idsFor(n)], n)
			key := fmt.Sprintf("%d/%s", n, tr.name)
			t.Logf("N=%-4d %-10s max/min %.3f  min %d max %d  p %.3g", n, tr.name, s.MaxMinRatio, s.Min, s.Max, s.PValue)
			if why, ok := knownSkew[key]; ok {
				// Fails when the generator improves: then drop the exception.
				if s.MaxMinRatio <= 1.05 {
					t.Errorf("N=%d at %s: max/min %.3f ≤ 1.05 — the known skew (%s) is gone; remove it from knownSkew",
						n, tr.name, s.MaxMinRatio, why)
				}
				if s.Min == 0 {
					t.Errorf("N=%d at %s: a shard is empty (%v)", n, tr.name, s)
				}
				continue
			}
			if s.MaxMinRatio > 1.05 {
				t.Errorf("N=%d at %s: max/min %.3f > 1.05 over %d IDs (%v)", n, tr.name, s.MaxMinRatio, len(ids[:idsFor(n)]), s)
			}
		}
	}
}

func TestKnownSkewMechanisms(t *testing.T) {
	t.Run("5 shards at 1000/s", func(t *testing.T) {
		ids, _ := generate(t, snowflake.Default, 10000, traffic{"1000/s", 1000}, nil)
		moves := 0
		for i := 1; i < len(ids); i++ {
			if ids[i]%5 != ids[i-1]%5 {
				moves++
			}
		}
		// The residue changes only where the sequence resets: 4 times in 10,000.
		if moves != 4 {
			t.Errorf("id %% 5 changed %d times over 10,000 steady IDs, want 4 (the sequence resets)", moves)
		}
	})
	// The sequence wraps modulo 2,048 even when a tick passes the threshold
	// part-way, so its low 11 bits cycle without a break at any rate (a
	// restart at 0 made 2,100-ID cycles at 100 IDs/ms and skewed 1,024 shards).
	t.Run("cycles at 100000/s", func(t *testing.T) {
		ids, _ := generate(t, snowflake.Default, 102400, traffic{"100000/s", 100000}, nil)
		for i := 1; i < len(ids); i++ {
			prev, cur := ids[i-1]&2047, ids[i]&2047
			if cur != (prev+1)&2047 {
				t.Fatalf("ID %d: low 11 bits %d after %d, want %d", i, cur, prev, (prev+1)&2047)
			}
		}
	})
}

// The contrast, at low traffic where every ID gets its own tick: the plain
// per-tick reset gives every ID sequence 0, so id % N moves only with the
// timestamp, by δ = (ticks between IDs) × 2^22 mod N per ID, and visits
// N / gcd(N, δ) residues. For powers of two δ is 0 and every ID lands in one
// shard; for 3 and 5 the timestamp moves the residue, except where δ ≡ 0
// (5 shards at 1 and 10 IDs/s: 1000 and 100 ticks × 2^22 are multiples of 5).
// idforge fills every shard for the same traffic.
func TestEvennessPlainPerTickResetContrast(t *testing.T) {
	for _, tr := range traffics[:3] {
		plain, _ := generate(t, plainLayout(), idsFor(1024), tr, nil)
		idforge, _ := generate(t, snowflake.Default, idsFor(1024), tr, nil)
		ticks := int64(1000 / tr.perSecond) // ms between IDs
		for _, n := range shardCounts {
			count := idsFor(n)
			p, f := modStats(plain[:count], n), modStats(idforge[:count], n)
			delta := ticks % n * (int64(1) << 22 % n) % n
			want := int(n / gcd(n, delta))
			t.Logf("N=%-4d %-7s plain: %d of %d shards used (max/min %.3g); idforge: %d (max/min %.3f)",
				n, tr.name, nonEmpty(p), n, p.MaxMinRatio, nonEmpty(f), f.MaxMinRatio)
			if got := nonEmpty(p); got != want {
				t.Errorf("N=%d at %s: plain snowflake used %d shards, want %d (δ = %d)", n, tr.name, got, want, delta)
			}
			if n&(n-1) == 0 && nonEmpty(p) != 1 {
				t.Errorf("N=%d at %s: plain snowflake used %d shards, want 1", n, tr.name, nonEmpty(p))
			}
			if nonEmpty(f) != int(n) {
				t.Errorf("N=%d at %s: idforge used %d of %d shards", n, tr.name, nonEmpty(f), n)
			}
		}
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// The seed's course story: 2 databases × 2 tables routed by db = id % 2,
// table = ((id+1) % 4)/2 + 1, one insert per millisecond.
func TestEvennessCourseRule(t *testing.T) {
	r := courseRouter(t)
	tr := traffic{"1000/s", 1000}
	count := func(layout snowflake.Layout) Stats {
		ids, _ := generate(t, layout, 1000, tr, nil)
		c, err := NewShardCounter(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := c.Add(id); err != nil {
				t.Fatal(err)
			}
		}
		return c.Stats()
	}
	plain, idforge := count(plainLayout()), count(snowflake.Default)
	t.Logf("plain:\n%s%v\nidforge:\n%s%v", plain.Table(40), plain, idforge.Table(40), idforge)
	if plain.Counts["m0.course_1"] != 1000 || nonEmpty(plain) != 1 {
		t.Errorf("plain snowflake: %v, want all 1000 rows in m0.course_1", plain.Counts)
	}
	if idforge.Min != 250 || idforge.Max != 250 || idforge.PValue < 0.99 {
		t.Errorf("idforge snowflake: %v, want 250 rows in each shard", idforge)
	}
}

// Random (Poisson) arrivals instead of steady ones: idforge's counts are
// never detectably uneven (chi-square p above 0.001), while the plain reset
// still piles low-traffic IDs into shard 0 for powers of two. For odd N
// idforge is as even as chance, so max/min is not held to 1.05 here: with
// 2,000 IDs expected per shard, binomial noise alone gives about 1.06.
func TestEvennessRandomArrivals(t *testing.T) {
	for _, tr := range []traffic{{"10/s", 10}, {"1000/s", 1000}} {
		idforge, _ := generate(t, snowflake.Default, idsFor(1024), tr, rand.New(rand.NewPCG(7, 11)))
		plain, _ := generate(t, plainLayout(), idsFor(1024), tr, rand.New(rand.NewPCG(7, 11)))
		for _, n := range shardCounts {
			f := modStats(idforge[:idsFor(n)], n)
			if f.PValue < 0.001 || f.Min == 0 {
				t.Errorf("N=%d, random %s: idforge %v", n, tr.name, f)
			}
			if p := modStats(plain[:idsFor(n)], n); n&(n-1) == 0 && p.PValue > 1e-6 {
				t.Errorf("N=%d, random %s: plain %v, want a clear skew", n, tr.name, p)
			}
		}
	}
}
