package convert

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

// Settings shape the string of a format: padding for the radix formats, a
// fixed prefix, and a date before the digits. The zero value writes the
// bare digits. Parts appear in the order Prefix, date, digits ("ord_" +
// "20261121" + "0000000016j").
type Settings struct {
	// Padded pads radix strings with leading zeros to the width of the
	// largest int64 (11 digits in radix-62, 13 in radix-36), so the strings
	// of every non-negative ID sort byte-wise like the numbers. Set it for
	// string keys that are sorted or range-scanned. Default false.
	Padded bool
	// Width pads radix strings to that many digits instead (0, the default:
	// no padding; at most the full width). IDs below base^Width sort like
	// the numbers; a larger ID is written in full, never truncated, but then
	// no longer sorts against the shorter strings. Setting both Padded and
	// Width is an error.
	Width int
	// Prefix is written before the string, and Parse requires and strips it.
	Prefix string
	// Date, when set, writes the date it returns as yyyyMMdd after Prefix,
	// for IDs a human can date at a glance, in the location of the time it
	// returns (func() time.Time { return time.Now().UTC() } for the UTC
	// date). The date is the day the string was made, not a property of
	// the ID: Parse checks that the 8 bytes are a valid date and skips
	// them, so Parse(Format(x)) == x always, while Format(Parse(s)) == s
	// only on the day s was made. A snowflake ID carries its own time;
	// decode it instead when the exact time matters.
	Date func() time.Time
}

// formats are the format names New knows, as struct tags spell them
// (`idgen:"snowflake,format=radix62"`).
var formats = []string{"decimal", "radix36", "radix62"}

// Formatter turns int64 IDs into strings and back in the form [New] was
// given. It is safe for concurrent use. The zero value writes and reads
// plain decimal, as New("decimal") does.
type Formatter struct{ f form }

// Format returns the string form of id.
func (f *Formatter) Format(id int64) string {
	if f.f == nil {
		return decimal{}.format(id)
	}
	return formatID(f.f, id)
}

// Parse reads the string form Format writes. Errors wrap
// [engine.ErrInvalidID] and quote the input.
func (f *Formatter) Parse(s string) (int64, error) {
	if f.f == nil {
		return decimal{}.parse(s)
	}
	return f.f.parse(s)
}

// New returns the formatter for a format name: "decimal" (which takes no
// padding, and reads with strconv's leniency), "radix62" or "radix36",
// shaped by the settings (at most one value; none means Settings{}). An
// unknown name or invalid settings give an error wrapping
// [engine.ErrInvalidConfig].
func New(format string, s ...Settings) (*Formatter, error) {
	var set Settings
	switch len(s) {
	case 0:
	case 1:
		set = s[0]
	default:
		return nil, fmt.Errorf("%w: convert.New takes at most one Settings, got %d", engine.ErrInvalidConfig, len(s))
	}
	if set.Padded && set.Width != 0 {
		return nil, fmt.Errorf("%w: format %q: Padded and Width %d both set: pad to the full width or to Width, not both", engine.ErrInvalidConfig, format, set.Width)
	}
	var f form
	var err error
	switch format {
	case "radix62":
		f, err = newRadix("radix62", alphabet62, radix62Width, set)
	case "radix36":
		f, err = newRadix("radix36", alphabet36, radix36Width, set)
	case "decimal":
		if set.Padded || set.Width != 0 {
			return nil, fmt.Errorf("%w: format \"decimal\" takes no padding (Padded, Width)", engine.ErrInvalidConfig)
		}
		f = decimal{}
	default:
		return nil, fmt.Errorf("%w: unknown format %q (known: %v)", engine.ErrInvalidConfig, format, formats)
	}
	if err != nil {
		return nil, err
	}
	if set.Date != nil {
		f = &dated{now: set.Date, inner: f}
	}
	if set.Prefix != "" {
		f = &affix{prefix: set.Prefix, inner: f}
	}
	return &Formatter{f: f}, nil
}
