package sharding

import (
	"math"
	"strings"
	"sync"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestChiSquarePKnownValues(t *testing.T) {
	// Critical values from chi-square tables: p = 0.05 and 0.01.
	for _, c := range []struct {
		x  float64
		df int
		p  float64
	}{
		{3.841, 1, 0.05}, {5.991, 2, 0.05}, {7.815, 3, 0.05}, {11.070, 5, 0.05},
		{6.635, 1, 0.01}, {15.086, 5, 0.01}, {18.307, 10, 0.05}, {124.342, 100, 0.05},
	} {
		if got := chiSquareP(c.x, c.df); !near(got, c.p, 2e-4) {
			t.Errorf("chiSquareP(%v, %d) = %.6f, want %.4f", c.x, c.df, got, c.p)
		}
	}
	if got := chiSquareP(3.84, 1); !near(got, 0.05, 5e-4) {
		t.Errorf("chiSquareP(3.84, 1) = %v", got)
	}
	if got := chiSquareP(11.07, 5); !near(got, 0.05, 5e-4) {
		t.Errorf("chiSquareP(11.07, 5) = %v", got)
	}
}

func TestChiSquarePClosedForms(t *testing.T) {
	// Q(k/2, x/2) has closed forms for small k; the points straddle x = a+1,
	// where gammaQ switches from the series to the continued fraction.
	forms := map[int]func(x float64) float64{
		1: func(x float64) float64 { return math.Erfc(math.Sqrt(x / 2)) },
		2: func(x float64) float64 { return math.Exp(-x / 2) },
		3: func(x float64) float64 {
			return math.Erfc(math.Sqrt(x/2)) + math.Sqrt(2*x/math.Pi)*math.Exp(-x/2)
		},
		4: func(x float64) float64 { return math.Exp(-x/2) * (1 + x/2) },
		6: func(x float64) float64 { return math.Exp(-x/2) * (1 + x/2 + x*x/8) },
	}
	for df, f := range forms {
		for _, x := range []float64{1e-4, 0.01, 0.5, 1, 2, 2.9, 3.1, 4, 6, 10, 30, 80, 200} {
			want := f(x)
			got := chiSquareP(x, df)
			if !near(got, want, 1e-12+1e-10*want) {
				t.Errorf("chiSquareP(%v, %d) = %.17g, want %.17g", x, df, got, want)
			}
		}
	}
}

func TestGammaBranchesAgree(t *testing.T) {
	// Both expansions are exact: from x = a+1 on, where gammaQ uses the
	// continued fraction, the series still converges and they must sum to 1,
	// including large a (1023 degrees of freedom for 1024 shards).
	for _, a := range []float64{0.5, 1.5, 4, 20, 511.5, 5000} {
		for _, x := range []float64{a + 1, a + 1 + math.Sqrt(a), a + 1 + 3*math.Sqrt(a)} {
			p, q := gammaPSeries(a, x), gammaQFraction(a, x)
			if !near(p+q, 1, 1e-10) {
				t.Errorf("a=%v x=%v: P+Q = %.15g", a, x, p+q)
			}
		}
	}
	// The chi-square with many degrees of freedom is nearly normal: Wilson–Hilferty.
	for _, x := range []float64{950, 1023, 1100} {
		k := 1023.0
		z := (math.Cbrt(x/k) - (1 - 2/(9*k))) / math.Sqrt(2/(9*k))
		want := 0.5 * math.Erfc(z/math.Sqrt2)
		if got := chiSquareP(x, 1023); !near(got, want, 1e-3) {
			t.Errorf("chiSquareP(%v, 1023) = %.5f, Wilson–Hilferty %.5f", x, got, want)
		}
	}
	if p := chiSquareP(0, 3); p != 1 {
		t.Errorf("chiSquareP(0, 3) = %v", p)
	}
	if p := chiSquareP(1, 0); !math.IsNaN(p) {
		t.Errorf("chiSquareP(1, 0) = %v, want NaN", p)
	}
	if p := chiSquareP(1e6, 3); p != 0 && p > 1e-300 {
		t.Errorf("chiSquareP(1e6, 3) = %v", p)
	}
}

func TestMeasure(t *testing.T) {
	even := measureMap(map[string]int{"a": 250, "b": 250, "c": 250, "d": 250})
	if even.Total != 1000 || even.Min != 250 || even.Max != 250 || even.MaxMinRatio != 1 ||
		even.StdDev != 0 || even.ChiSquare != 0 || even.DegreesOfFreedom != 3 || even.PValue != 1 {
		t.Errorf("even = %+v", even)
	}
	skew := measureMap(map[string]int{"a": 100, "b": 200})
	// mean 150: chi2 = (50² + 50²)/150, p = erfc(sqrt(chi2/2)).
	if skew.MaxMinRatio != 2 || skew.StdDev != 50 || !near(skew.ChiSquare, 100.0/3, 1e-12) ||
		!near(skew.PValue, math.Erfc(math.Sqrt(50.0/3)), 1e-15) || skew.PValue > 1e-7 {
		t.Errorf("skew = %+v", skew)
	}
	empty := measureMap(map[string]int{"a": 0, "b": 10, "c": 0, "d": 10})
	if !math.IsInf(empty.MaxMinRatio, 1) || empty.Min != 0 || empty.PValue > 0.01 {
		t.Errorf("two empty shards = %+v", empty)
	}
	for _, m := range []map[string]int{nil, {"a": 0, "b": 0}, {"a": 7}} {
		s := measureMap(m)
		if s.MaxMinRatio != 1 || s.PValue != 1 || s.ChiSquare != 0 {
			t.Errorf("Measure(%v) = %+v", m, s)
		}
		if maxMin, p := Measure(m); maxMin != 1 || p != 1 {
			t.Errorf("Measure(%v) = %v, %v; want 1, 1", m, maxMin, p)
		}
	}
	if maxMin, p := Measure(map[string]int{"a": 100, "b": 200}); maxMin != 2 || !near(p, math.Erfc(math.Sqrt(50.0/3)), 1e-15) {
		t.Errorf("Measure(100, 200) = %v, %v", maxMin, p)
	}
	sl := MeasureSlice([]int{3, 5, 4})
	if sl.Total != 12 || sl.Min != 3 || sl.Max != 5 || sl.Counts["1"] != 5 || sl.DegreesOfFreedom != 2 {
		t.Errorf("MeasureSlice = %+v", sl)
	}
}

func TestStatsText(t *testing.T) {
	s := measureMap(map[string]int{"m1.course_2": 50, "m0.course_1": 100})
	if got := s.String(); !strings.HasPrefix(got, "2 shards, 150 rows, min 50, max 100, max/min 2.000") {
		t.Errorf("String() = %q", got)
	}
	want := "m0.course_1      100 ##########\nm1.course_2       50 #####\n"
	if got := s.Table(10); got != want {
		t.Errorf("Table(10) =\n%s\nwant\n%s", got, want)
	}
}

func TestShardCounter(t *testing.T) {
	r := courseRouter(t)
	c, err := NewShardCounter(r)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for id := int64(w * 1000); id < int64(w*1000+1000); id++ {
				if _, err := c.Add(id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := c.Add(-1); err == nil {
		t.Error("Add(-1) succeeded")
	}
	s := c.Stats()
	if s.Total != 4000 || s.Min != 1000 || s.Max != 1000 || len(s.Counts) != 4 {
		t.Errorf("stats = %+v", s)
	}
	// Only IDs with the same low two bits: two shards stay empty and show as 0.
	c2, _ := NewShardCounter(r)
	for id := int64(0); id < 400; id += 4 {
		_, _ = c2.Add(id)
	}
	counts := c2.Counts()
	if counts["m0.course_1"] != 100 || counts["m0.course_2"] != 0 || counts["m1.course_1"] != 0 || len(counts) != 4 {
		t.Errorf("counts = %v", counts)
	}
}
