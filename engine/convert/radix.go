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

// radix62Width and radix36Width are the digits an int64 needs at most in
// each base: the width Settings.Padded pads to.
const (
	radix62Width = 11
	radix36Width = 13
)

// radixFormat formats IDs in base 62 (0-9A-Za-z) or base 36 (0-9a-z),
// optionally zero-padded to a fixed width. It is safe for concurrent use.
type radixFormat struct {
	name     string
	alphabet string
	base     uint64
	width    int
	index    [256]int8 // byte -> digit value, -1 if not a digit
}

func newRadix(name, alphabet string, maxWidth int, s Settings) (*radixFormat, error) {
	width := s.Width
	if s.Padded {
		width = maxWidth
	}
	if width < 0 || width > maxWidth {
		return nil, fmt.Errorf("%w: %s Width %d: want 0 (no padding) to %d", engine.ErrInvalidConfig, name, width, maxWidth)
	}
	r := &radixFormat{name: name, alphabet: alphabet, base: uint64(len(alphabet)), width: width}
	for i := range r.index {
		r.index[i] = -1
	}
	for i := range len(alphabet) {
		r.index[alphabet[i]] = int8(i)
	}
	return r, nil
}

// Format returns id in the formatter's base, padded to its width.
func (r *radixFormat) Format(id int64) string {
	var buf [24]byte
	return string(r.appendID(buf[:0], id))
}

func (r *radixFormat) appendID(dst []byte, id int64) []byte {
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
func (r *radixFormat) Parse(s string) (int64, error) {
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

func (r *radixFormat) invalid(s, why string) error {
	return fmt.Errorf("%w: %s %q: %s", engine.ErrInvalidID, r.name, s, why)
}
