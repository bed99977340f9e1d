package sharding

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
)

// Stats is the tests' full view of the statistics Measure summarises.
type Stats struct {
	Counts              map[string]int
	Total, Min, Max     int
	MaxMinRatio, StdDev float64
	ChiSquare           float64
	DegreesOfFreedom    int
	PValue              float64
}

func fromStats(s stats, counts map[string]int) Stats {
	return Stats{Counts: counts, Total: s.total, Min: s.min, Max: s.max, MaxMinRatio: s.maxMinRatio,
		StdDev: s.stdDev, ChiSquare: s.chiSquare, DegreesOfFreedom: s.df, PValue: s.pValue}
}

// measureMap is measure over a map of counts.
func measureMap(counts map[string]int) Stats {
	c := maps.Clone(counts)
	if c == nil {
		c = map[string]int{}
	}
	return fromStats(measure(slices.Collect(maps.Values(counts))), c)
}

// MeasureSlice is measure over counts indexed by shard, keyed by the
// decimal index.
func MeasureSlice(counts []int) Stats {
	c := make(map[string]int, len(counts))
	for i, n := range counts {
		c[fmt.Sprint(i)] = n
	}
	return fromStats(measure(counts), c)
}

func (s Stats) String() string {
	return fmt.Sprintf("%d shards, %d rows, min %d, max %d, max/min %.3f, stddev %.2f, chi2 %.2f (df %d), p %.4f",
		len(s.Counts), s.Total, s.Min, s.Max, s.MaxMinRatio, s.StdDev, s.ChiSquare, s.DegreesOfFreedom, s.PValue)
}

// Table prints one line per shard with a bar scaled to width.
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

// shardCounter counts IDs per shard of a router, every shard from 0.
type shardCounter struct {
	router *Router
	mu     sync.Mutex
	counts map[string]int
}

func NewShardCounter(r *Router) (*shardCounter, error) {
	shards, err := r.Shards()
	if err != nil {
		return nil, err
	}
	c := &shardCounter{router: r, counts: make(map[string]int, len(shards))}
	for _, s := range shards {
		c.counts[s.String()] = 0
	}
	return c, nil
}

func (c *shardCounter) Add(id int64) (Shard, error) {
	s, err := c.router.Route(id)
	if err != nil {
		return Shard{}, err
	}
	c.mu.Lock()
	c.counts[s.String()]++
	c.mu.Unlock()
	return s, nil
}

func (c *shardCounter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *shardCounter) Stats() Stats { return measureMap(c.Counts()) }
