package convert_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
)

// checkRoundTrip asserts both directions for one formatter: Parse(Format(x))
// == x, and any s that Parse accepts is the canonical Format of its value.
func checkRoundTrip(t *testing.T, name string, f *convert.Formatter, s string, x int64) {
	t.Helper()
	if back, err := f.Parse(f.Format(x)); err != nil || back != x {
		t.Fatalf("%s: Parse(Format(%d) = %q) = %d, %v", name, x, f.Format(x), back, err)
	}
	v, err := f.Parse(s)
	if err != nil {
		if !errors.Is(err, engine.ErrInvalidID) {
			t.Fatalf("%s: Parse(%q) error %v does not wrap ErrInvalidID", name, s, err)
		}
		return
	}
	if got := f.Format(v); got != s {
		t.Fatalf("%s: Parse(%q) = %d, but Format(%d) = %q: two strings for one ID", name, s, v, v, got)
	}
}

// checkOrder asserts that a padded formatter's strings compare like the
// non-negative numbers they stand for.
func checkOrder(t *testing.T, name string, f *convert.Formatter, x, y int64) {
	t.Helper()
	x, y = x&math.MaxInt64, y&math.MaxInt64
	a, b := f.Format(x), f.Format(y)
	if (x < y) != (a < b) || (x == y) != (a == b) {
		t.Fatalf("%s: %d vs %d ordered differently from %q vs %q", name, x, y, a, b)
	}
}

func seed(f *testing.F, strs ...string) {
	ints := []int64{0, 1, -1, 61, 62, 1 << 53, math.MaxInt64, math.MinInt64}
	for i, s := range strs {
		f.Add(s, ints[i%len(ints)], ints[(i+3)%len(ints)])
	}
}

func FuzzRadix62(f *testing.F) {
	seed(f, "0", "z", "10", "-1", "00", "-0", "AzL8n0Y58m7", "AzL8n0Y58m8", "-AzL8n0Y58m8", "00000000010", "", "é")
	plain := mustFormat(f, "radix62", convert.Settings{})
	padded := mustFormat(f, "radix62", convert.Settings{Padded: true})
	narrow := mustFormat(f, "radix62", convert.Settings{Width: 4})
	f.Fuzz(func(t *testing.T, s string, x, y int64) {
		if got, want := plain.Format(x), radix62Oracle(x); got != want {
			t.Fatalf("Format(%d) = %q, math/big says %q", x, got, want)
		}
		checkRoundTrip(t, "plain", plain, s, x)
		checkRoundTrip(t, "padded", padded, s, x)
		checkRoundTrip(t, "width 4", narrow, s, x)
		checkOrder(t, "padded", padded, x, y)
	})
}

func FuzzRadix36(f *testing.F) {
	seed(f, "0", "z", "Z", "10", "-1", "00", "-0", "1y2p0ij32e8e7", "1y2p0ij32e8e8", "-1y2p0ij32e8e8", "0000000000010", "")
	plain := mustFormat(f, "radix36", convert.Settings{})
	padded := mustFormat(f, "radix36", convert.Settings{Padded: true})
	f.Fuzz(func(t *testing.T, s string, x, y int64) {
		if got, want := plain.Format(x), strconv.FormatInt(x, 36); got != want {
			t.Fatalf("Format(%d) = %q, strconv says %q", x, got, want)
		}
		checkRoundTrip(t, "plain", plain, s, x)
		checkRoundTrip(t, "padded", padded, s, x)
		checkOrder(t, "padded", padded, x, y)
	})
}

func FuzzDecimal(f *testing.F) {
	seed(f, "0", "-0", "+1", "01", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1e3", "")
	dec := must(convert.New("decimal"))
	f.Fuzz(func(t *testing.T, s string, x, _ int64) {
		// strconv accepts "+1" and "-0", which decimal inherits, so only
		// Parse(Format(x)) and the error contract hold for every string.
		if back, err := dec.Parse(dec.Format(x)); err != nil || back != x {
			t.Fatalf("Parse(Format(%d)) = %d, %v", x, back, err)
		}
		if _, err := dec.Parse(s); err != nil && !errors.Is(err, engine.ErrInvalidID) {
			t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidID", s, err)
		}
	})
}

func FuzzAffix(f *testing.F) {
	seed(f, "ord_10", "ord_", "ord10", "ord_z", "ord_-1", "_x", "ord_00", "")
	pre := mustFormat(f, "radix62", convert.Settings{Padded: true, Prefix: "ord_"})
	f.Fuzz(func(t *testing.T, s string, x, y int64) {
		checkRoundTrip(t, "prefix", pre, s, x)
		checkOrder(t, "prefix padded", pre, x, y)
	})
}

func FuzzDatePrefix(f *testing.F) {
	seed(f, "2026112110", "20261121", "2026112100000000010", "20261131z", "2026112", "20261121-1", "")
	// With the clock fixed, the date prefix is canonical too.
	d := mustFormat(f, "radix62", convert.Settings{Padded: true, Date: fixedNow("2026-11-21T23:27:14Z")})
	f.Fuzz(func(t *testing.T, s string, x, y int64) {
		if len(s) >= 8 && s[:8] != "20261121" {
			// Another valid date parses to the same ID; only today's
			// string round-trips back to itself.
			s = "20261121" + s[8:]
		}
		checkRoundTrip(t, "date", d, s, x)
		checkOrder(t, "date padded", d, x, y)
	})
}
