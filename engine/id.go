package engine

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ID is an int64 identifier that travels safely through JSON: it marshals as a
// string, because JavaScript numbers lose precision above 2^53, and accepts
// either a string or a number when unmarshalled. In a database it is a plain
// BIGINT ([driver.Valuer] and [sql.Scanner]).
type ID int64

// String returns the decimal form of the ID.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

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
