package convert

import (
	"fmt"
	"math"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/radix"
)

const (
	alphabet62 = radix.Alphabet62
	alphabet36 = radix.Alphabet36
)

// Radix62Width and Radix36Width are the digits an int64 needs at most in each
// base: the width [Padded] pads to.
const (
	Radix62Width = 11
	Radix36Width = 13
)

// Option configures a radix formatter.
type Option func(*config)

type config struct {
	width  int
	padded bool
}

// WithWidth pads every string with leading zeros to n digits, so strings of
// non-negative IDs below base^n sort like the numbers. A larger ID is written
// in full, never truncated, but then no longer sorts against the n-digit
// strings: pick n for the largest ID you expect, or use [Padded].
// n = 0 means no padding.
func WithWidth(n int) Option { return func(c *config) { c.width, c.padded = n, false } }

// Padded pads to the width of the largest int64 ([Radix62Width] or
// [Radix36Width] digits), so every non-negative ID sorts correctly.
func Padded() Option { return func(c *config) { c.padded = true } }

// Radix formats IDs in base 62 (0-9A-Za-z) or base 36 (0-9a-z), optionally
// zero-padded to a fixed width. Make one with [NewRadix62] or [NewRadix36];
// it is safe for concurrent use.
type Radix struct {
	name     string
	alphabet string
	base     uint64
	width    int
	index    [256]int8 // byte -> digit value, -1 if not a digit
}

// NewRadix62 returns the base-62 formatter (alphabet 0-9A-Za-z, ASCII order).
func NewRadix62(opts ...Option) (*Radix, error) {
	return newRadix("radix62", alphabet62, Radix62Width, opts)
}

// NewRadix36 returns the base-36 formatter (alphabet 0-9a-z, lower case only).
func NewRadix36(opts ...Option) (*Radix, error) {
	return newRadix("radix36", alphabet36, Radix36Width, opts)
}

func newRadix(name, alphabet string, maxWidth int, opts []Option) (*Radix, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.padded {
		c.width = maxWidth
	}
	if c.width < 0 || c.width > maxWidth {
		return nil, fmt.Errorf("%w: %s width %d: want 0 (no padding) to %d", engine.ErrInvalidConfig, name, c.width, maxWidth)
	}
	r := &Radix{name: name, alphabet: alphabet, base: uint64(len(alphabet)), width: c.width}
	for i := range r.index {
		r.index[i] = -1
	}
	for i := range len(alphabet) {
		r.index[alphabet[i]] = int8(i)
	}
	return r, nil
}

// Width returns the padded width in digits, 0 if unpadded.
func (r *Radix) Width() int { return r.width }

// Format returns id in the formatter's base, padded to its width.
func (r *Radix) Format(id int64) string {
	var buf [24]byte
	return string(r.appendID(buf[:0], id))
}

func (r *Radix) appendID(dst []byte, id int64) []byte {
	u := uint64(id)
	if id < 0 {
		dst = append(dst, '-')
		u = -u // also right for math.MinInt64: 1<<63
	}
	var tmp radix.Buffer
	var i int
	// Constant bases: see radix.Digits.
	if r.base == 62 {
		i = radix.Digits(&tmp, u, 62, alphabet62)
	} else {
		i = radix.Digits(&tmp, u, 36, alphabet36)
	}
	for n := len(tmp) - i; n < r.width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, tmp[i:]...)
}

// Parse reads the string Format wrote. It rejects anything else: other
// characters, a wrong width, superfluous leading zeros, "-0", and values
// outside the int64 range.
func (r *Radix) Parse(s string) (int64, error) {
	digits, neg := s, false
	if len(digits) > 0 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	switch {
	case digits == "":
		return 0, r.invalid(s, "no digits")
	case len(digits) < r.width:
		return 0, r.invalid(s, fmt.Sprintf("%d digits, want %d", len(digits), r.width))
	case len(digits) > max(r.width, 1) && digits[0] == '0':
		return 0, r.invalid(s, "leading zero")
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	for i := range len(digits) {
		d := r.index[digits[i]]
		if d < 0 {
			return 0, r.invalid(s, fmt.Sprintf("byte %q at %d is not a %s digit", digits[i], i, r.name))
		}
		if v > (limit-uint64(d))/r.base {
			return 0, fmt.Errorf("%w: %s %q: %w", engine.ErrInvalidID, r.name, s, engine.ErrIDOverflow)
		}
		v = v*r.base + uint64(d)
	}
	if neg {
		if v == 0 {
			return 0, r.invalid(s, "negative zero")
		}
		return -int64(v), nil
	}
	return int64(v), nil
}

func (r *Radix) invalid(s, why string) error {
	return fmt.Errorf("%w: %s %q: %s", engine.ErrInvalidID, r.name, s, why)
}
