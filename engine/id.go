package engine

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/idforge/idforge/engine/internal/radix"
)

// ID is an int64 identifier that travels safely through JSON: it marshals as a
// string, because JavaScript numbers lose precision above 2^53, and accepts
// either a string or a number when unmarshalled. In a database it is a plain
// BIGINT ([driver.Valuer] and [sql.Scanner]).
type ID int64

// String returns the decimal form of the ID.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Base58 returns the ID in bwmarrin/snowflake's base 58 (Flickr's alphabet,
// lower case before upper case, no padding): the same string as that
// library's ID.Base58, for data written with it. These strings do not sort
// like the IDs; [ParseBase58] reads them back.
func (id ID) Base58() string { return id.base58() }

// base58 writes the ID in base 58; negative IDs get a leading '-', as
// strconv writes them.
func (id ID) base58() string {
	var tmp radix.Buffer
	u := uint64(id)
	var b [1 + len(tmp)]byte
	n := 0
	if id < 0 {
		b[0], n = '-', 1
		u = -u // also right for math.MinInt64: 1<<63
	}
	i := radix.Digits(&tmp, u, 58, radix.Alphabet58) // a constant base: see radix.Digits
	n += copy(b[n:], tmp[i:])
	return string(b[:n])
}

// ParseBase58 reads the base-58 form of [ID.Base58] (and of
// bwmarrin/snowflake's ParseBase58). Other bytes, an empty string and a
// value outside the int64 range are errors wrapping [ErrInvalidID].
func ParseBase58(s string) (ID, error) {
	digits, neg := s, false
	if len(digits) > 1 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if digits == "" {
		return 0, fmt.Errorf("%w: base58 %.80q: no digits", ErrInvalidID, s)
	}
	limit := uint64(1<<63 - 1)
	if neg {
		limit++
	}
	var v uint64
	for i := range len(digits) {
		d := base58Digits[digits[i]]
		switch {
		case d < 0:
			return 0, fmt.Errorf("%w: base58 %.80q: byte %q at %d is not a base-58 digit", ErrInvalidID, s, digits[i], i)
		case v > (limit-uint64(d))/58:
			return 0, fmt.Errorf("%w: base58 %.80q: outside the 64-bit range", ErrInvalidID, s)
		}
		v = v*58 + uint64(d)
	}
	if neg {
		if v == 0 {
			return 0, fmt.Errorf("%w: base58 %.80q: negative zero", ErrInvalidID, s)
		}
		return ID(-int64(v)), nil // v may be 1<<63: -int64 wraps to MinInt64, as wanted
	}
	return ID(v), nil
}

// base58Digits maps a byte to its base-58 digit, -1 for other bytes.
var base58Digits = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := range len(radix.Alphabet58) {
		t[radix.Alphabet58[i]] = int8(i)
	}
	return t
}()

// parseID reads the decimal form written by [ID.String].
func parseID(s string) (ID, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalidID(s, err)
	}
	return ID(v), nil
}

// MarshalText implements encoding.TextMarshaler (and so JSON as a string).
func (id ID) MarshalText() ([]byte, error) {
	return strconv.AppendInt(nil, int64(id), 10), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// UnmarshalJSON accepts "1234", 1234 and null (which leaves the ID unchanged).
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(s) > 0 && s[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return invalidID(string(b), err)
		}
	}
	v, err := parseID(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Value implements driver.Valuer: the ID is stored as an int64.
func (id ID) Value() (driver.Value, error) { return int64(id), nil }

// Scan implements sql.Scanner for integer, text and NULL columns.
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*id = 0
	case int64:
		*id = ID(v)
	case []byte:
		return id.UnmarshalText(v)
	case string:
		return id.UnmarshalText([]byte(v))
	default:
		return fmt.Errorf("%w: cannot scan %T into engine.ID", ErrInvalidID, src)
	}
	return nil
}

// invalidID says what was wrong with s in words, not in strconv's
// ("strconv.ParseInt: parsing ...: invalid syntax").
func invalidID(s string, err error) error {
	why := "not a decimal number"
	if errors.Is(err, strconv.ErrRange) {
		why = "outside the 64-bit range"
	}
	return fmt.Errorf("%w: %.80q: %s", ErrInvalidID, s, why)
}
