package sharding

import (
	"maps"
	"math"
	"slices"
)

// Measure says how evenly rows spread over shards, given the rows per
// shard (a shard with no rows must be present with 0: a missing one is not
// counted at all).
//
// maxMin is the most rows in one shard over the fewest: 1 is perfectly
// even, +Inf when a shard is empty while another is not, 1 when every
// shard is empty.
//
// p is the chi-square p-value of the counts against a uniform spread: the
// chance that a uniform random spread of as many rows looks at least this
// uneven. Small values (below 0.01, say) mean the spread is not uniform; a
// value very close to 1 means it is more even than chance, as a cycling
// sequence makes it. It is 1 with fewer than two shards or no rows.
func Measure(counts map[string]int) (maxMin, p float64) {
	s := measure(slices.Collect(maps.Values(counts)))
	return s.maxMinRatio, s.pValue
}

// stats describes how evenly rows spread over shards.
type stats struct {
	total, min, max int
	maxMinRatio     float64
	stdDev          float64 // population standard deviation
	chiSquare       float64 // Pearson's Σ (count − mean)² / mean
	df              int     // degrees of freedom: shards − 1
	pValue          float64
}

func measure(counts []int) stats {
	s := stats{maxMinRatio: 1, pValue: 1}
	if len(counts) == 0 {
		return s
	}
	s.min, s.max = counts[0], counts[0]
	for _, c := range counts {
		s.total += c
		s.min = min(s.min, c)
		s.max = max(s.max, c)
	}
	switch {
	case s.min > 0:
		s.maxMinRatio = float64(s.max) / float64(s.min)
	case s.max > 0:
		s.maxMinRatio = math.Inf(1)
	}
	k := float64(len(counts))
	mean := float64(s.total) / k
	var sq float64
	for _, c := range counts {
		d := float64(c) - mean
		sq += d * d
	}
	s.stdDev = math.Sqrt(sq / k)
	s.df = len(counts) - 1
	if s.total > 0 && s.df > 0 {
		s.chiSquare = sq / mean
		s.pValue = chiSquareP(s.chiSquare, s.df)
	}
	return s
}

// chiSquareP returns the upper-tail probability of the chi-square
// distribution with df degrees of freedom at x: the p-value of a goodness-of-fit
// statistic x. It is Q(df/2, x/2), the regularized upper incomplete gamma
// function. It returns 1 for x <= 0 and NaN for df < 1.
func chiSquareP(x float64, df int) float64 {
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
