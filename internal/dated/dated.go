// Package dated is the grammar of dated chain formats, such as
// INV-{yyyy}{MM}{dd}-{seq:6}: business numbers whose counter restarts every
// day, month or year. The registry (idforge.Registry.Dated), the GORM
// plugin's tags, `idforge serve` and `idforge gen` share it.
//
// A format is literal text and four fields:
//
//	{yyyy}    the year, 4 digits
//	{MM}      the month, 2 digits
//	{dd}      the day of the month, 2 digits
//	{seq:N}   the counter, N digits (1 to 18), zero-padded
//
// {yyyy} and {seq:N} are required, {dd} needs {MM}, and the fields come in
// the order above, so that the strings, all of one length, sort by period
// and then by counter. The finest date field names the period: {dd} a day,
// {MM} a month, {yyyy} alone a year. Literal text is ASCII letters, digits and
// - _ . / : #, so that a format fits a struct tag, a URL and a SQL LIKE
// pattern as it is.
package dated

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idforge/idforge/engine"
)

// Format is a parsed dated format. It is immutable and safe for concurrent
// use.
type Format struct {
	raw    string
	parts  []part
	period string // "year", "month" or "day"
	width  int    // digits of the counter
	size   int    // bytes of every string
}

// part is literal text or a field: 'y', 'M', 'd' or 's' (the counter).
type part struct {
	lit   string
	field byte
}

// fieldWidth is the digits a field takes.
func (f *Format) fieldWidth(p part) int {
	switch p.field {
	case 'y':
		return 4
	case 'M', 'd':
		return 2
	case 's':
		return f.width
	}
	return len(p.lit)
}

// IsFormat reports whether s is meant as a dated format rather than a
// format name such as "radix62": it has a field.
func IsFormat(s string) bool { return strings.ContainsAny(s, "{}") }

// Parse reads a dated format. Errors wrap engine.ErrInvalidConfig and say
// what is wrong.
func Parse(s string) (*Format, error) {
	f, why := parse(s)
	if why != "" {
		return nil, fmt.Errorf("%w: dated format %q: %s (want literal text and {yyyy}, {MM}, {dd}, {seq:N} in that order, as in INV-{yyyy}{MM}{dd}-{seq:6})",
			engine.ErrInvalidConfig, s, why)
	}
	return f, nil
}

func parse(s string) (*Format, string) {
	f := &Format{raw: s}
	order := "yMds"
	last := -1
	for rest := s; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			open = len(rest)
		}
		if lit := rest[:open]; lit != "" {
			if i := strings.IndexFunc(lit, func(c rune) bool { return !literal(c) }); i >= 0 {
				r, _ := utf8.DecodeRuneInString(lit[i:])
				return nil, fmt.Sprintf("%q is not allowed in literal text (ASCII letters, digits and - _ . / : # are)", string(r))
			}
			f.parts = append(f.parts, part{lit: lit})
		}
		rest = rest[open:]
		if rest == "" {
			break
		}
		end := strings.IndexByte(rest, '}')
		if rest[0] == '}' || end < 0 {
			return nil, "unbalanced braces"
		}
		var p part
		switch name := rest[1:end]; {
		case name == "yyyy":
			p.field = 'y'
		case name == "MM":
			p.field = 'M'
		case name == "dd":
			p.field = 'd'
		case strings.HasPrefix(name, "seq:"):
			n, err := strconv.Atoi(name[4:])
			if err != nil || n < 1 || n > 18 || strconv.Itoa(n) != name[4:] {
				return nil, fmt.Sprintf("{%s}: the counter takes 1 to 18 digits, as {seq:6}", name)
			}
			p.field, f.width = 's', n
		default:
			return nil, fmt.Sprintf("unknown field {%s}", name)
		}
		i := strings.IndexByte(order, p.field)
		switch {
		case i == last:
			return nil, fmt.Sprintf("{%s} given twice", rest[1:end])
		case i < last:
			return nil, fmt.Sprintf("{%s} comes after a finer field: the strings would not sort by time, then counter", rest[1:end])
		}
		last = i
		f.parts = append(f.parts, p)
		rest = rest[end+1:]
	}
	has := func(c byte) bool {
		for _, p := range f.parts {
			if p.field == c {
				return true
			}
		}
		return false
	}
	switch {
	case !has('y'):
		return nil, "{yyyy} is missing"
	case !has('s'):
		return nil, "{seq:N} is missing"
	case has('d') && !has('M'):
		return nil, "{dd} needs {MM}"
	case has('d'):
		f.period = "day"
	case has('M'):
		f.period = "month"
	default:
		f.period = "year"
	}
	for _, p := range f.parts {
		f.size += f.fieldWidth(p)
	}
	return f, ""
}

func literal(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:#", c)
}

// String returns the format as written.
func (f *Format) String() string { return f.raw }

// Period is "day", "month" or "year": how long a counter runs.
func (f *Format) Period() string { return f.period }

// Width is the digits of the counter.
func (f *Format) Width() int { return f.width }

// Len is the length of every string of the format.
func (f *Format) Len() int { return f.size }

// Max is the largest counter the format can write: 10^Width - 1.
func (f *Format) Max() int64 {
	m := int64(1)
	for range f.width {
		m *= 10
	}
	return m - 1
}

// Key names the period holding t, in t's location: yyyy, yyyyMM or
// yyyyMMdd. Each period's counter is its own store sequence, named
// "<name>:<key>".
func (f *Format) Key(t time.Time) string {
	switch f.period {
	case "day":
		return t.Format("20060102")
	case "month":
		return t.Format("200601")
	}
	return t.Format("2006")
}

// keyLen is the length of the format's period keys.
func (f *Format) keyLen() int {
	return map[string]int{"day": 8, "month": 6, "year": 4}[f.period]
}

// Format writes counter n of the period holding t (in t's location). A
// counter below 1 or above [Format.Max] is an error wrapping
// engine.ErrIDOverflow, never a wrong number; so is a year outside 4 digits.
func (f *Format) Format(t time.Time, n int64) (string, error) {
	if n < 1 || n > f.Max() {
		return "", fmt.Errorf("%w: counter %d of the %s %s does not fit {seq:%d} of %q", engine.ErrIDOverflow, n, f.period, f.Key(t), f.width, f.raw)
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Errorf("%w: year %d does not fit {yyyy} of %q", engine.ErrIDOverflow, y, f.raw)
	}
	b := make([]byte, 0, f.size)
	for _, p := range f.parts {
		switch p.field {
		case 0:
			b = append(b, p.lit...)
		case 'y':
			b = pad(b, int64(t.Year()), 4)
		case 'M':
			b = pad(b, int64(t.Month()), 2)
		case 'd':
			b = pad(b, int64(t.Day()), 2)
		case 's':
			b = pad(b, n, f.width)
		}
	}
	return string(b), nil
}

func pad(b []byte, v int64, width int) []byte {
	for n := len(strconv.FormatInt(v, 10)); n < width; n++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, v, 10)
}

// Read takes a string of the format apart: its period key and its counter.
// Anything else is an error wrapping engine.ErrInvalidID.
func (f *Format) Read(s string) (key string, n int64, err error) {
	bad := func(why string) (string, int64, error) {
		return "", 0, fmt.Errorf("%w: %.80q is not a string of the dated format %q: %s", engine.ErrInvalidID, s, f.raw, why)
	}
	if len(s) != f.size {
		return bad(fmt.Sprintf("%d bytes, want %d", len(s), f.size))
	}
	var k strings.Builder
	for _, p := range f.parts {
		w := f.fieldWidth(p)
		v := s[:w]
		s = s[w:]
		if p.field == 0 {
			if v != p.lit {
				return bad(fmt.Sprintf("%q where the format has %q", v, p.lit))
			}
			continue
		}
		if strings.Trim(v, "0123456789") != "" {
			return bad(fmt.Sprintf("%q is not %d digits", v, w))
		}
		if p.field == 's' {
			n, _ = strconv.ParseInt(v, 10, 64)
		} else {
			k.WriteString(v)
		}
	}
	if _, err := time.Parse(map[int]string{4: "2006", 6: "200601", 8: "20060102"}[k.Len()], k.String()); err != nil || n < 1 {
		return bad("no such date, or a counter of 0")
	}
	return k.String(), n, nil
}

// Like returns the SQL LIKE pattern, with '!' as its escape character, that
// matches every string of the period key (made by [Format.Key]), and false
// for a key of another period length: the floor of that period's sequence
// reads MAX of the column over the rows it matches.
func (f *Format) Like(key string) (string, bool) {
	if len(key) != f.keyLen() || strings.Trim(key, "0123456789") != "" {
		return "", false
	}
	var b strings.Builder
	for _, p := range f.parts {
		switch p.field {
		case 0:
			b.WriteString(strings.ReplaceAll(p.lit, "_", "!_"))
		case 'y':
			b.WriteString(key[:4])
		case 'M':
			b.WriteString(key[4:6])
		case 'd':
			b.WriteString(key[6:8])
		case 's':
			b.WriteString(strings.Repeat("_", f.width))
		}
	}
	return b.String(), true
}
