package sharding

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
)

// Stats describes how evenly rows spread over shards.
type Stats struct {
	// Counts is rows per shard. Shards with no rows must be present with 0:
	// a shard missing from the map is not counted at all.
	Counts map[string]int
	Total  int // sum of Counts
	Min    int // fewest rows in one shard
	Max    int // most rows in one shard
	// MaxMinRatio is Max/Min: 1 is perfectly even; +Inf when a shard is empty
	// while another is not; 1 when every shard is empty.
	MaxMinRatio float64
	// StdDev is the population standard deviation of the counts.
	StdDev float64
	// ChiSquare is Pearson's statistic Σ (count − mean)² / mean against a
	// uniform spread, with DegreesOfFreedom = shards − 1.
	ChiSquare        float64
	DegreesOfFreedom int
	// PValue is the chance that a uniform random spread of Total rows looks
	// at least this uneven. Small values (below 0.01, say) mean the spread is
	// not uniform; a value very close to 1 means it is more even than chance,
	// as a cycling sequence makes it. It is 1 with fewer than two shards or
	// no rows.
	PValue float64
}

// Measure computes the statistics of per-shard counts.
func Measure(counts map[string]int) Stats {
	s := measure(slices.Collect(maps.Values(counts)))
	s.Counts = maps.Clone(counts)
	if s.Counts == nil {
		s.Counts = map[string]int{}
	}
	return s
}

// MeasureSlice computes the statistics of counts indexed by shard; Counts is
// keyed by the decimal index.
func MeasureSlice(counts []int) Stats {
	s := measure(counts)
	s.Counts = make(map[string]int, len(counts))
	for i, c := range counts {
		s.Counts[fmt.Sprint(i)] = c
	}
	return s
}

func measure(counts []int) Stats {
	s := Stats{MaxMinRatio: 1, PValue: 1}
	if len(counts) == 0 {
		return s
	}
	s.Min, s.Max = counts[0], counts[0]
	for _, c := range counts {
		s.Total += c
		s.Min = min(s.Min, c)
		s.Max = max(s.Max, c)
	}
	switch {
	case s.Min > 0:
		s.MaxMinRatio = float64(s.Max) / float64(s.Min)
	case s.Max > 0:
		s.MaxMinRatio = math.Inf(1)
	}
	k := float64(len(counts))
	mean := float64(s.Total) / k
	var sq float64
	for _, c := range counts {
		d := float64(c) - mean
		sq += d * d
	}
	s.StdDev = math.Sqrt(sq / k)
	s.DegreesOfFreedom = len(counts) - 1
	if s.Total > 0 && s.DegreesOfFreedom > 0 {
		s.ChiSquare = sq / mean
		s.PValue = ChiSquareP(s.ChiSquare, s.DegreesOfFreedom)
	}
	return s
}

// String prints the summary on one line, e.g.
// "4 shards, 1000 rows, min 250, max 250, max/min 1.000, stddev 0.00, chi2 0.00 (df 3), p 1.0000".
func (s Stats) String() string {
	return fmt.Sprintf("%d shards, %d rows, min %d, max %d, max/min %.3f, stddev %.2f, chi2 %.2f (df %d), p %.4f",
		len(s.Counts), s.Total, s.Min, s.Max, s.MaxMinRatio, s.StdDev, s.ChiSquare, s.DegreesOfFreedom, s.PValue)
}

// Table prints one line per shard, sorted by name: name, count and a bar of
// '#' scaled so the fullest shard gets width characters.
func (s Stats) Table(width int) string {
	names := slices.Sorted(maps.Keys(s.Counts))
	pad := 0
	for _, n := range names {
		pad = max(pad, len(n))
	}
	var b strings.Builder
	for _, n := range names {
		c := s.Counts[n]
		bar := 0
		if s.Max > 0 {
			bar = int(math.Round(float64(c) * float64(width) / float64(s.Max)))
		}
		fmt.Fprintf(&b, "%-*s %8d", pad, n, c)
		if bar > 0 {
			b.WriteString(" " + strings.Repeat("#", bar))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ChiSquareP returns the upper-tail probability of the chi-square
// distribution with df degrees of freedom at x: the p-value of a goodness-of-fit
// statistic x. It is Q(df/2, x/2), the regularized upper incomplete gamma
// function. It returns 1 for x <= 0 and NaN for df < 1.
func ChiSquareP(x float64, df int) float64 {
	if df < 1 || math.IsNaN(x) {
		return math.NaN()
	}
	if x <= 0 {
		return 1
	}
	return gammaQ(float64(df)/2, x/2)
}

// gammaQ is the regularized upper incomplete gamma function Q(a, x), a > 0,
// x > 0: the series for P = 1 − Q where it converges fast (x < a+1), the
// continued fraction for Q elsewhere (Numerical Recipes §6.2).
func gammaQ(a, x float64) float64 {
	if x < a+1 {
		return 1 - gammaPSeries(a, x)
	}
	return gammaQFraction(a, x)
}

const (
	gammaEps = 1e-15
	// Both expansions need O(√a) terms; 100,000 covers a far beyond any
	// shard count.
	gammaMaxIter = 100000
)

// gammaPrefix is x^a e^−x / Γ(a), computed in logs.
func gammaPrefix(a, x float64) float64 {
	lg, _ := math.Lgamma(a)
	return math.Exp(a*math.Log(x) - x - lg)
}

// gammaPSeries is P(a, x) = x^a e^−x / Γ(a) · Σ x^n / (a(a+1)…(a+n)).
func gammaPSeries(a, x float64) float64 {
	term := 1 / a
	sum := term
	for n := 1; n < gammaMaxIter; n++ {
		term *= x / (a + float64(n))
		sum += term
		if math.Abs(term) < math.Abs(sum)*gammaEps {
			break
		}
	}
	return sum * gammaPrefix(a, x)
}

// gammaQFraction is Q(a, x) by the continued fraction
// 1/(x+1−a− 1·(1−a)/(x+3−a− 2·(2−a)/(x+5−a− …))) in Lentz's method.
func gammaQFraction(a, x float64) float64 {
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < gammaMaxIter; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < gammaEps {
			break
		}
	}
	return h * gammaPrefix(a, x)
}

// ShardCounter counts IDs per shard of a router. It is safe for concurrent use.
type ShardCounter struct {
	router Router
	mu     sync.Mutex
	counts map[string]int
}

// NewShardCounter starts every shard of r at 0, so empty shards show in the
// statistics. It fails when r cannot list its shards (an unbounded interval).
func NewShardCounter(r Router) (*ShardCounter, error) {
	shards, err := r.Shards()
	if err != nil {
		return nil, err
	}
	c := &ShardCounter{router: r, counts: make(map[string]int, len(shards))}
	for _, s := range shards {
		c.counts[s.String()] = 0
	}
	return c, nil
}

// Add routes id and counts it.
func (c *ShardCounter) Add(id int64) (Shard, error) {
	s, err := c.router.Route(id)
	if err != nil {
		return Shard{}, err
	}
	c.mu.Lock()
	c.counts[s.String()]++
	c.mu.Unlock()
	return s, nil
}

// Counts returns a copy of the counts, keyed by [Shard.String].
func (c *ShardCounter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Stats measures the counts so far.
func (c *ShardCounter) Stats() Stats { return Measure(c.Counts()) }
