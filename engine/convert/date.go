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
	inner form
}

func (d *dated) format(id int64) string { return formatID(d, id) }

func (d *dated) parse(s string) (int64, error) {
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
