package convert

import (
	"fmt"
	"math"

	"github.com/idforge/idforge/engine"
)

// The alphabets are in ASCII order, so padded strings sort like the
// numbers.
const (
	alphabet62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	alphabet36 = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// digitBuffer holds the digits of any uint64 in base 36 or 62: base 36
// needs the most, 13.
type digitBuffer [13]byte

// digits writes u in base into the end of tmp and returns where the digits
// start. It is small enough to inline, which makes a constant base compile
// to multiplications: more than twice as fast as dividing by a variable.
func digits(tmp *digitBuffer, u, base uint64, alphabet string) int {
	i := len(tmp)
	for u >= base {
		q := u / base
		i--
		tmp[i] = alphabet[u-q*base]
		u = q
	}
	i--
	tmp[i] = alphabet[u]
	return i
}

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

// format returns id in the formatter's base, padded to its width.
func (r *radixFormat) format(id int64) string {
	var buf [24]byte
	return string(r.appendID(buf[:0], id))
}

func (r *radixFormat) appendID(dst []byte, id int64) []byte {
	u := uint64(id)
	if id < 0 {
		dst = append(dst, '-')
		u = -u // also right for math.MinInt64: 1<<63
	}
	var tmp digitBuffer
	var i int
	// Constant bases: see digits.
	if r.base == 62 {
		i = digits(&tmp, u, 62, alphabet62)
	} else {
		i = digits(&tmp, u, 36, alphabet36)
	}
	for n := len(tmp) - i; n < r.width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, tmp[i:]...)
}

// parse reads the string format wrote. It rejects anything else: other
// characters, a wrong width, superfluous leading zeros, "-0", and values
// outside the int64 range.
func (r *radixFormat) parse(s string) (int64, error) {
	ds, neg := s, false
	if len(ds) > 0 && ds[0] == '-' {
		ds, neg = ds[1:], true
	}
	switch {
	case ds == "":
		return 0, r.invalid(s, "no digits")
	case len(ds) < r.width:
		return 0, r.invalid(s, fmt.Sprintf("%d digits, want %d", len(ds), r.width))
	case len(ds) > max(r.width, 1) && ds[0] == '0':
		return 0, r.invalid(s, "leading zero")
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	for i := range len(ds) {
		d := r.index[ds[i]]
		if d < 0 {
			return 0, r.invalid(s, fmt.Sprintf("byte %q at %d is not a %s digit", ds[i], i, r.name))
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
