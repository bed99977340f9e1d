package convert_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
)

func mustFormat(t testing.TB, format string, s convert.Settings) *convert.Formatter {
	t.Helper()
	f, err := convert.New(format, s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// radix62Oracle is math/big's base 62 with the case swapped: big uses
// 0-9a-zA-Z, we use the ASCII-ordered 0-9A-Za-z.
func radix62Oracle(x int64) string {
	s := big.NewInt(x).Text(62)
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return r
	}, s)
}

func TestRadixKnownValues(t *testing.T) {
	r62 := mustFormat(t, "radix62", convert.Settings{})
	r62p := mustFormat(t, "radix62", convert.Settings{Padded: true})
	r36 := mustFormat(t, "radix36", convert.Settings{})
	r36p := mustFormat(t, "radix36", convert.Settings{Padded: true})
	tests := []struct {
		f    *convert.Formatter
		id   int64
		want string
	}{
		{r62, 0, "0"},
		{r62, 9, "9"},
		{r62, 10, "A"},
		{r62, 36, "a"},
		{r62, 61, "z"},
		{r62, 62, "10"},
		{r62, 3843, "zz"},
		{r62, 1234567890, "1LY7VK"},
		{r62, math.MaxInt64, "AzL8n0Y58m7"},
		{r62, -1, "-1"},
		{r62, math.MinInt64, "-AzL8n0Y58m8"},
		{r62p, 0, "00000000000"},
		{r62p, 62, "00000000010"},
		{r62p, math.MaxInt64, "AzL8n0Y58m7"},
		{r62p, -62, "-00000000010"},
		{r62p, math.MinInt64, "-AzL8n0Y58m8"},
		{r36, 35, "z"},
		{r36, 36, "10"},
		{r36, math.MaxInt64, "1y2p0ij32e8e7"},
		{r36, math.MinInt64, "-1y2p0ij32e8e8"},
		{r36p, 36, "0000000000010"},
		{r36p, math.MaxInt64, "1y2p0ij32e8e7"},
	}
	for _, tt := range tests {
		got := tt.f.Format(tt.id)
		if got != tt.want {
			t.Errorf("%v: Format(%d) = %q, want %q", tt.f, tt.id, got, tt.want)
		}
		back, err := tt.f.Parse(tt.want)
		if err != nil || back != tt.id {
			t.Errorf("%v: Parse(%q) = %d, %v; want %d", tt.f, tt.want, back, err, tt.id)
		}
	}
}

func TestRadixMatchesIndependentImplementations(t *testing.T) {
	r62 := mustFormat(t, "radix62", convert.Settings{})
	r36 := mustFormat(t, "radix36", convert.Settings{})
	for _, x := range sampleIDs() {
		if got, want := r62.Format(x), radix62Oracle(x); got != want {
			t.Errorf("radix62 Format(%d) = %q, math/big says %q", x, got, want)
		}
		if got, want := r36.Format(x), strconv.FormatInt(x, 36); got != want {
			t.Errorf("radix36 Format(%d) = %q, strconv says %q", x, got, want)
		}
	}
}

// sampleIDs returns the edges of every digit count in both bases plus a
// deterministic spread of other values, sorted and distinct.
func sampleIDs() []int64 {
	ids := []int64{0, 1, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, -1}
	for _, base := range []int64{36, 62} {
		for p := int64(1); p <= math.MaxInt64/base; p *= base {
			ids = append(ids, p-1, p, p+1, p*base-1, -p, -(p - 1))
		}
	}
	x := uint64(0x9E3779B97F4A7C15)
	for range 2000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		ids = append(ids, int64(x), int64(x>>(x%63)))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func TestPaddedSortsLikeNumbers(t *testing.T) {
	for _, c := range []struct {
		f     *convert.Formatter
		width int
	}{
		{mustFormat(t, "radix62", convert.Settings{Padded: true}), 11},
		{mustFormat(t, "radix36", convert.Settings{Padded: true}), 13},
	} {
		f := c.f
		var prev string
		for i, x := range nonNegative(sampleIDs()) {
			s := f.Format(x)
			if len(s) != c.width {
				t.Fatalf("Format(%d) = %q: %d bytes, want width %d", x, s, len(s), c.width)
			}
			if i > 0 && s <= prev {
				t.Fatalf("padded strings out of order: %q (for %d) <= %q", s, x, prev)
			}
			prev = s
		}
	}
}

func nonNegative(ids []int64) []int64 {
	i, _ := slices.BinarySearch(ids, 0)
	return ids[i:]
}

// Documents why padding exists: unpadded strings do not sort like numbers.
func TestUnpaddedDoesNotSort(t *testing.T) {
	r := mustFormat(t, "radix62", convert.Settings{})
	if a, b := r.Format(61), r.Format(62); a < b {
		t.Fatalf("unpadded %q < %q: the padding advice in the docs would be wrong", a, b)
	}
}

func TestWidth(t *testing.T) {
	r := mustFormat(t, "radix62", convert.Settings{Width: 3})
	for _, tt := range []struct {
		id   int64
		want string
	}{{5, "005"}, {3843, "0zz"}, {238327, "zzz"}, {238328, "1000"}, {-5, "-005"}} {
		if got := r.Format(tt.id); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.id, got, tt.want)
		}
		if back, err := r.Parse(tt.want); err != nil || back != tt.id {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.want, back, err, tt.id)
		}
	}
	// Padded and Width contradict each other.
	if f, err := convert.New("radix36", convert.Settings{Padded: true, Width: 4}); !errors.Is(err, engine.ErrInvalidConfig) || f != nil {
		t.Errorf("Padded and Width 4: %v, %v; want nil and ErrInvalidConfig", f, err)
	}
	if got := mustFormat(t, "radix36", convert.Settings{Padded: true}).Format(1); len(got) != 13 {
		t.Errorf("radix36 Padded: Format(1) = %q, want 13 digits", got)
	}
}

func TestBadWidth(t *testing.T) {
	for _, tt := range []struct {
		name  string
		width int
	}{{"radix62", -1}, {"radix62", 11 + 1}, {"radix36", 13 + 1}} {
		f, err := convert.New(tt.name, convert.Settings{Width: tt.width})
		if !errors.Is(err, engine.ErrInvalidConfig) || f != nil {
			t.Errorf("%s Width %d = %v, %v; want nil and ErrInvalidConfig", tt.name, tt.width, f, err)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Itoa(tt.width)) {
			t.Errorf("error %q does not name the width %d", err, tt.width)
		}
	}
}

func TestRadixParseErrors(t *testing.T) {
	r62 := mustFormat(t, "radix62", convert.Settings{})
	r62p := mustFormat(t, "radix62", convert.Settings{Padded: true})
	r62w3 := mustFormat(t, "radix62", convert.Settings{Width: 3})
	r36 := mustFormat(t, "radix36", convert.Settings{})
	tests := []struct {
		f        *convert.Formatter
		in       string
		overflow bool
	}{
		{r62, "", false},
		{r62, "-", false},
		{r62, "-0", false},
		{r62, "00", false},
		{r62, "01", false},
		{r62, "-01", false},
		{r62, "+1", false},
		{r62, " 1", false},
		{r62, "1 ", false},
		{r62, "1_0", false},
		{r62, "é", false},
		{r62, "\x00", false},
		{r62, "AzL8n0Y58m8", true},  // MaxInt64 + 1
		{r62, "-AzL8n0Y58m9", true}, // MinInt64 - 1
		{r62, "zzzzzzzzzzz", true},  // 11 digits, above 2^64 too
		{r62, "10000000000000000000000", true},
		{r62p, "10", false},             // too short
		{r62p, "00000000000000", false}, // zero, too long
		{r62p, "0AzL8n0Y58m7", false},   // MaxInt64 with a 12th digit
		{r62w3, "0100", false},
		{r62w3, "01", false},
		{r36, "Z", false},            // radix-36 is lower case only
		{r36, "1y2p0ij32e8e8", true}, // MaxInt64 + 1
	}
	for _, tt := range tests {
		v, err := tt.f.Parse(tt.in)
		if !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("%v: Parse(%q) = %d, %v; want ErrInvalidID", tt.f, tt.in, v, err)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
			t.Errorf("Parse(%q): error %q does not quote the input", tt.in, err)
		}
		if got := errors.Is(err, engine.ErrIDOverflow); got != tt.overflow {
			t.Errorf("Parse(%q): errors.Is(err, ErrIDOverflow) = %v, want %v (%v)", tt.in, got, tt.overflow, err)
		}
	}
}

func TestAffix(t *testing.T) {
	pre := mustFormat(t, "radix62", convert.Settings{Prefix: "ord_"})
	for _, tt := range []struct {
		f    *convert.Formatter
		id   int64
		want string
	}{
		{pre, 62, "ord_10"},
		{pre, -1, "ord_-1"},
		{mustFormat(t, "radix62", convert.Settings{Prefix: ""}), 1, "1"},
		{mustFormat(t, "decimal", convert.Settings{Prefix: "n"}), 12, "n12"},
		{mustFormat(t, "decimal", convert.Settings{Date: fixedNow("2026-01-02T00:00:00Z")}), 3, "202601023"},
		{mustFormat(t, "radix36", convert.Settings{Prefix: "o", Date: fixedNow("2026-01-02T00:00:00Z")}), 36, "o2026010210"},
	} {
		if got := tt.f.Format(tt.id); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.id, got, tt.want)
		}
		if back, err := tt.f.Parse(tt.want); err != nil || back != tt.id {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.want, back, err, tt.id)
		}
	}
	for _, tt := range []struct {
		f    *convert.Formatter
		in   string
		want string // in the message besides the input
	}{
		{pre, "ord10", `prefix "ord_"`},
		{pre, "usr_10", `prefix "ord_"`},
		{pre, "ord_", "no digits"},
		{pre, "ord_1!", "not a radix62 digit"},
		{mustFormat(t, "decimal", convert.Settings{Prefix: "n"}), "n4x2", "not a decimal number"},
	} {
		_, err := tt.f.Parse(tt.in)
		if !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Parse(%q) error %v; want ErrInvalidID", tt.in, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, strconv.Quote(tt.in)) || !strings.Contains(msg, tt.want) {
			t.Errorf("Parse(%q) error %q; want the input and %q in it", tt.in, msg, tt.want)
		}
	}
}

func fixedNow(s string) func() time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return func() time.Time { return t }
}

func TestDatePrefix(t *testing.T) {
	d := mustFormat(t, "decimal", convert.Settings{Date: fixedNow("2026-11-21T23:27:14Z")})
	if got := d.Format(42); got != "2026112142" {
		t.Fatalf("Format(42) = %q, want 2026112142", got)
	}
	// Parse takes any valid date: the date is not part of the ID.
	for in, want := range map[string]int64{"2026112142": 42, "19991231-7": -7, "202402290": 0} {
		if v, err := d.Parse(in); err != nil || v != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, v, err, want)
		}
	}
	for _, in := range []string{"", "2026112", "20261121", "2026-1-142", "2026113142", "2025022942", "2026112142x", "+0261121"} {
		if v, err := d.Parse(in); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("Parse(%q) = %d, %v; want ErrInvalidID naming the input", in, v, err)
		}
	}

	// The date is taken in the location of the time now returns.
	east := time.FixedZone("UTC+8", 8*3600)
	local := mustFormat(t, "decimal", convert.Settings{Date: func() time.Time { return time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC).In(east) }})
	if got := local.Format(1); got != "202611221" {
		t.Errorf("date in UTC+8 at 20:00Z: Format(1) = %q, want 202611221", got)
	}

	// A date function reading the system clock gives today's date.
	before := time.Now().UTC().Format("20060102")
	got := mustFormat(t, "decimal", convert.Settings{Date: func() time.Time { return time.Now().UTC() }}).Format(7)
	after := time.Now().UTC().Format("20060102")
	if got != before+"7" && got != after+"7" {
		t.Errorf("system clock: Format(7) = %q, want %q", got, before+"7")
	}
}

func TestNew(t *testing.T) {
	for name, want := range map[string]string{"radix62": "10", "radix36": "1q", "decimal": "62"} {
		f, err := convert.New(name)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if got := f.Format(62); got != want {
			t.Errorf("New(%q).Format(62) = %q, want %q", name, got, want)
		}
	}
	var zero convert.Formatter // the zero value is decimal, as New("decimal") is
	for _, id := range []int64{0, 62, -7, math.MaxInt64} {
		if got, want := zero.Format(id), must(convert.New("decimal")).Format(id); got != want || got != strconv.FormatInt(id, 10) {
			t.Errorf("Format(%d): zero Formatter %q, New(\"decimal\") %q; want decimal", id, got, want)
		}
	}
	if v, err := zero.Parse("+7"); v != 7 || err != nil {
		t.Errorf("zero Formatter Parse(+7) = %d, %v; want strconv's 7", v, err)
	}
	if f := must(convert.New("radix62", convert.Settings{Padded: true})); f.Format(1) != "00000000001" {
		t.Errorf("New radix62 Padded: Format(1) = %q", f.Format(1))
	}
	for _, tt := range []struct {
		name string
		set  convert.Settings
	}{{"radix64", convert.Settings{}}, {"", convert.Settings{}}, {"Radix62", convert.Settings{}},
		{"decimal", convert.Settings{Padded: true}}, {"decimal", convert.Settings{Width: 3}}} {
		f, err := convert.New(tt.name, tt.set)
		if f != nil || !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), strconv.Quote(tt.name)) {
			t.Errorf("New(%q, %+v) = %v, %v; want nil and ErrInvalidConfig naming it", tt.name, tt.set, f, err)
		}
	}
	if _, err := convert.New("decimal", convert.Settings{}, convert.Settings{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("New with two Settings: %v, want ErrInvalidConfig", err)
	}
}

func must(f *convert.Formatter, err error) *convert.Formatter {
	if err != nil {
		panic(err)
	}
	return f
}

func TestFormatAllocations(t *testing.T) {
	r62 := mustFormat(t, "radix62", convert.Settings{Padded: true})
	formatters := map[string]*convert.Formatter{
		"radix62":        r62,
		"radix36":        mustFormat(t, "radix36", convert.Settings{}),
		"decimal":        mustFormat(t, "decimal", convert.Settings{}),
		"prefix":         mustFormat(t, "radix62", convert.Settings{Padded: true, Prefix: "ord_"}),
		"decimal-prefix": mustFormat(t, "decimal", convert.Settings{Prefix: "ord_"}),
		"date":           mustFormat(t, "radix62", convert.Settings{Padded: true, Date: fixedNow("2026-11-21T00:00:00Z")}),
		"date-in-prefix": mustFormat(t, "radix62", convert.Settings{Padded: true, Prefix: "o", Date: time.Now}),
	}
	for name, f := range formatters {
		id := int64(math.MaxInt64)
		if n := testing.AllocsPerRun(100, func() { _ = f.Format(id) }); n > 1 {
			t.Errorf("%s: %.1f allocations per Format, want at most 1", name, n)
		}
	}
}

// The package's formatters write what a generator draws; convert adds no
// string generator of its own.
func TestStringer(t *testing.T) {
	var n int64 = 60
	gen := genFunc(func(context.Context) (int64, error) { n++; return n, nil })
	f := mustFormat(t, "radix62", convert.Settings{Prefix: "ord_"})
	var got []string
	for range 3 {
		id, err := gen.NextID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Format(id))
	}
	if want := []string{"ord_z", "ord_10", "ord_11"}; !slices.Equal(got, want) {
		t.Fatalf("NextString: %q, want %q", got, want)
	}
}
