package chain_test

import (
	"math"
	"math/bits"
	"testing"
)

// histogram is a log-linear latency histogram for the benchmarks: exact
// below 16 ns, then 16 linear buckets per power of two, so a reported
// percentile is at most 1/16 (6.25 %) above the true value. Recording is an
// array increment: cheap enough not to distort what it measures.
type histogram struct {
	counts [64 * subBuckets]uint64
	n      uint64
	_      [56]byte // one per goroutine side by side: keep n off the next one's line
}

const (
	subBits    = 4
	subBuckets = 1 << subBits
)

func (h *histogram) record(ns int64) {
	h.counts[bucketOf(max(ns, 0))]++
	h.n++
}

func bucketOf(v int64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return (shift+1)<<subBits + int(v>>shift) - subBuckets
}

// upperBound is the largest value that lands in bucket i.
func upperBound(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	shift := i>>subBits - 1
	m := int64(i%subBuckets + subBuckets)
	return (m+1)<<shift - 1
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the upper bound of the bucket holding the q-quantile.
func (h *histogram) quantile(q float64) int64 {
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			return upperBound(i)
		}
	}
	return 0
}

func TestHistogram(t *testing.T) {
	for _, v := range []int64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 999_999, 1 << 40, 1<<62 + 12345} {
		i := bucketOf(v)
		if upperBound(i) < v || (i > 0 && upperBound(i-1) >= v) {
			t.Errorf("value %d in bucket %d covering (%d, %d]", v, i, upperBound(i-1), upperBound(i))
		}
		if v >= subBuckets && float64(upperBound(i)-v) > float64(v)/subBuckets {
			t.Errorf("value %d reported as %d: more than 1/16 off", v, upperBound(i))
		}
	}
	var h histogram
	for v := int64(1); v <= 10_000; v++ {
		h.record(v)
	}
	var o histogram
	o.record(1 << 30) // one outlier in 10,001 samples: beyond p99.99
	h.merge(&o)
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0.5, 5000}, {0.99, 9900}, {0.999, 9990}, {0.9999, 9999}, {1, 1 << 30}} {
		got := h.quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*(1+1.0/subBuckets) {
			t.Errorf("quantile(%v) = %d, want %d within 1/16", tc.q, got, tc.want)
		}
	}
}
