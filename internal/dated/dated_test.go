package dated

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{ // format: its period, width and length
		"INV-{yyyy}{MM}{dd}-{seq:6}": "day 6 19",
		"{yyyy}{MM}{seq:8}":          "month 8 14",
		"Y{yyyy}/{seq:1}":            "year 1 7",
		"{yyyy}.{MM}.{dd}#{seq:18}":  "day 18 29",
		"a_b:{yyyy}{seq:3}x":         "year 3 12",
	} {
		f, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if got := strings.Join([]string{f.Period(), itoa(f.Width()), itoa(f.Len())}, " "); got != want {
			t.Errorf("Parse(%q) = %s, want %s", in, got, want)
		}
	}
	for in, why := range map[string]string{
		"":                         "{yyyy} is missing",
		"INV-{seq:6}":              "{yyyy} is missing",
		"{yyyy}{MM}{dd}":           "{seq:N} is missing",
		"{yyyy}{dd}{seq:4}":        "{dd} needs {MM}",
		"{dd}{MM}{yyyy}{seq:4}":    "comes after a finer field",
		"{yyyy}{seq:4}{MM}":        "comes after a finer field",
		"{yyyy}{yyyy}{seq:4}":      "given twice",
		"{yyyy}{seq:0}":            "1 to 18 digits",
		"{yyyy}{seq:19}":           "1 to 18 digits",
		"{yyyy}{seq:06}":           "1 to 18 digits",
		"{yyyy}{seq}":              "unknown field {seq}",
		"{YYYY}{seq:4}":            "unknown field {YYYY}",
		"{yyyy{seq:4}":             "unknown field",
		"{yyyy}}{seq:4}":           "unbalanced braces",
		"{yyyy}{seq:4":             "unbalanced braces",
		"INV {yyyy}{seq:4}":        `" " is not allowed`,
		"INV,{yyyy}{seq:4}":        `"," is not allowed`,
		"INV%{yyyy}{seq:4}":        `"%" is not allowed`,
		"O'Brien-{yyyy}{seq:4}":    `"'" is not allowed`,
		"Rechnung-{yyyy}{seq:4}-ü": `"ü" is not allowed`,
	} {
		_, err := Parse(in)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q): err = %v, want ErrInvalidConfig saying %q", in, err, why)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Strings of a format sort by period, then by counter, and read back.
func TestFormatSortsAndReadsBack(t *testing.T) {
	f, err := Parse("INV-{yyyy}{MM}{dd}-{seq:6}")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	var out []string
	for _, at := range []time.Time{day, day.Add(time.Second)} {
		for _, n := range []int64{1, 2, 9, 10, 999_999} {
			s, err := f.Format(at, n)
			if err != nil {
				t.Fatal(err)
			}
			key, back, err := f.Read(s)
			if err != nil || key != f.Key(at) || back != n {
				t.Errorf("Read(%q) = %q, %d, %v; want %q, %d", s, key, back, err, f.Key(at), n)
			}
			out = append(out, s)
		}
	}
	if !slices.IsSorted(out) || out[0] != "INV-20261231-000001" || out[5] != "INV-20270101-000001" {
		t.Errorf("strings %q: want sorted, from INV-20261231-000001, the 6th INV-20270101-000001", out)
	}
	for _, n := range []int64{0, -1, 1_000_000} {
		if s, err := f.Format(day, n); !errors.Is(err, engine.ErrIDOverflow) {
			t.Errorf("Format(counter %d) = %q, %v; want ErrIDOverflow", n, s, err)
		}
	}
	for _, bad := range []string{"", "INV-20261231-00000", "INX-20261231-000001", "INV-20261231-00000a", "INV-20261331-000001", "INV-20261231-000000"} {
		if _, _, err := f.Read(bad); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Read(%q): err = %v, want ErrInvalidID", bad, err)
		}
	}
}

// The period key follows the time's location: 23:30 UTC on the 25th is the
// 26th in Tokyo.
func TestKeyInLocation(t *testing.T) {
	f, _ := Parse("{yyyy}{MM}{dd}{seq:4}")
	at := time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	if k, kt := f.Key(at), f.Key(at.In(tokyo)); k != "20261125" || kt != "20261126" {
		t.Errorf("keys %s (UTC), %s (Tokyo); want 20261125, 20261126", k, kt)
	}
	m, _ := Parse("{yyyy}-{MM}-{seq:4}")
	y, _ := Parse("{yyyy}-{seq:4}")
	if m.Key(at) != "202611" || y.Key(at) != "2026" {
		t.Errorf("month key %s, year key %s", m.Key(at), y.Key(at))
	}
}

func TestLike(t *testing.T) {
	f, _ := Parse("IN_V-{yyyy}{MM}{dd}-{seq:3}")
	if got, ok := f.Like("20261125"); !ok || got != "IN!_V-20261125-___" {
		t.Errorf("Like = %q, %v", got, ok)
	}
	for _, k := range []string{"202611", "2026112a", ""} {
		if got, ok := f.Like(k); ok {
			t.Errorf("Like(%q) = %q, want none: not a day key", k, got)
		}
	}
}
