package convert

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// form is one of the shapes a [Formatter] writes: *radixFormat, decimal,
// or an *affix or *dated around another form.
type form interface {
	format(id int64) string
	parse(s string) (int64, error)
}

// decimal is the plain base-10 form. Parse inherits strconv's leniency
// ("+7" and "007" read as 7).
type decimal struct{}

func (decimal) format(id int64) string { return strconv.FormatInt(id, 10) }

func (decimal) parse(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		why := "not a decimal number"
		if errors.Is(err, strconv.ErrRange) {
			why = "outside the 64-bit range"
		}
		return 0, fmt.Errorf("%w: %.80q: %s", engine.ErrInvalidID, s, why)
	}
	return v, nil
}

// affix wraps an inner formatter with a fixed prefix.
type affix struct {
	prefix string
	inner  form
}

func (a *affix) format(id int64) string { return formatID(a, id) }

func (a *affix) parse(s string) (int64, error) {
	rest, ok := strings.CutPrefix(s, a.prefix)
	if !ok {
		return 0, fmt.Errorf("%w: %q: want prefix %q", engine.ErrInvalidID, s, a.prefix)
	}
	return parseInner(a.inner, s, rest)
}

// parseInner parses the part of s that a wrapper's inner formatter wrote, and
// names the whole input if that fails.
func parseInner(inner form, s, part string) (int64, error) {
	v, err := inner.parse(part)
	if err != nil {
		return 0, fmt.Errorf("convert: %q: %w", s, err)
	}
	return v, nil
}

// formatID formats id with f into a stack buffer, so the returned string is
// the only allocation when it fits in 64 bytes.
func formatID(f form, id int64) string {
	var buf [64]byte
	return string(appendID(buf[:0], f, id))
}

// appendID appends f's form of id to dst. It switches on the concrete types
// of this package instead of calling an interface method, which would make
// dst escape to the heap and cost wrappers a second allocation.
func appendID(dst []byte, f form, id int64) []byte {
	switch f := f.(type) {
	case *radixFormat:
		return f.appendID(dst, id)
	case decimal:
		return strconv.AppendInt(dst, id, 10)
	case *affix:
		dst = append(dst, f.prefix...)
		return appendID(dst, f.inner, id)
	case *dated:
		dst = f.now().AppendFormat(dst, dateLayout)
		return appendID(dst, f.inner, id)
	default:
		return append(dst, f.format(id)...)
	}
}
