package convert

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

const dateLayout = "20060102"

// dated writes the current date before an inner formatter's string.
type dated struct {
	now   func() time.Time
	inner engine.Formatter
}

// WithDatePrefix returns a formatter that writes the date of formatting as
// yyyyMMdd before inner's string ("20261121" + "42"), for IDs a human can date
// at a glance. now supplies the date, in the location of the time it returns;
// nil means the current UTC date (pass time.Now for the local date). A nil
// inner means [engine.Decimal].
//
// The date is the day the string was made, not a property of the ID: the
// same ID formatted on two days gives two strings, and Parse checks that the
// first 8 bytes are a valid date, strips them and returns the inner ID. So
// Parse(Format(x)) == x always, while Format(Parse(s)) == s only on the day
// s was made. A snowflake ID carries its own time; decode it instead when
// the exact time matters.
func WithDatePrefix(now func() time.Time, inner engine.Formatter) engine.Formatter {
	if now == nil {
		now = utcNow
	}
	return &dated{now: now, inner: orDecimal(inner)}
}

func utcNow() time.Time { return time.Now().UTC() }

func (d *dated) Format(id int64) string { return formatID(d, id) }

func (d *dated) Parse(s string) (int64, error) {
	if len(s) < len(dateLayout) {
		return 0, fmt.Errorf("%w: %q: want a yyyyMMdd date prefix", engine.ErrInvalidID, s)
	}
	date := s[:len(dateLayout)]
	// time.Parse accepts fewer digits for some fields; insist on 8 digits.
	for i := range len(date) {
		if date[i] < '0' || date[i] > '9' {
			return 0, fmt.Errorf("%w: %q: want a yyyyMMdd date prefix", engine.ErrInvalidID, s)
		}
	}
	if _, err := time.Parse(dateLayout, date); err != nil {
		return 0, fmt.Errorf("%w: %q: date prefix %q is not a date", engine.ErrInvalidID, s, date)
	}
	return parseInner(d.inner, s, s[len(dateLayout):])
}
