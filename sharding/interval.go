package sharding

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
)

// period is the length of one time bucket of an interval router: the
// finest date field of its table layout.
type period int

const (
	yearly  period = iota + 1 // order_2026
	monthly                   // order_202611
	daily                     // order_20261121
)

func (p period) String() string {
	switch p {
	case yearly:
		return "yearly"
	case monthly:
		return "monthly"
	case daily:
		return "daily"
	}
	return fmt.Sprintf("period(%d)", int(p))
}

// Interval configures a router that puts each row in the table of the time
// bucket its snowflake ID was issued in: the ID's own timestamp, decoded with
// Layout, no lookup. Build it with [NewInterval]. Every table is in one
// database.
type Interval struct {
	// Layout decodes the IDs; it must be the layout of the generator that
	// issued them.
	Layout snowflake.Layout
	// Table names the tables: a Go time layout in braces where the date
	// goes, e.g. "order_{200601}". The layout's finest field sets the
	// bucket: "{2006}" yearly, "{200601}" monthly, "{20060102}" daily; a
	// field finer than a day (an hour) is refused, since every time of a
	// bucket must give the bucket's name. At most 256 bytes.
	Table string
	// Location is the time zone whose calendar draws the buckets; nil means UTC.
	Location *time.Location
	// Start and End optionally bound the routable time range [Start, End):
	// an ID outside is an error, and [Router.Shards] lists the tables in
	// between (at most 65,536). A zero value leaves that side open.
	Start, End time.Time
	// Clock tells the time Route compares IDs with; nil means clock.System.
	// An ID issued more than a minute after its Now is refused: its
	// timestamp was read with another layout than the one it was made
	// with (a seconds ID read in milliseconds lands weeks ahead).
	Clock clock.Clock
}

// maxAhead is how far ahead of the router's clock an ID's timestamp may be
// (clocks of the machines issuing IDs differ by less).
const maxAhead = time.Minute

// intervalRouter is a validated Interval.
type intervalRouter struct {
	cfg            Interval
	prefix, suffix string
	format         string
	period         period
	anchor         int64 // bucket of Start, or of the layout's epoch
}

// NewInterval validates iv and builds its router. A bad layout, a Table
// without one date layout in braces, a layout that repeats names or holds
// fields finer than a day, an empty or inverted range, or a range
// [Start, End) of more than 65,536 tables wraps engine.ErrInvalidConfig.
func NewInterval(iv Interval) (*Router, error) {
	if err := iv.Layout.Validate(); err != nil {
		return nil, err
	}
	if iv.Location == nil {
		iv.Location = time.UTC
	}
	if iv.Clock == nil {
		iv.Clock = clock.System
	}
	if len(iv.Table) > maxNameText {
		return nil, fmt.Errorf("%w: sharding.Interval.Table %s: %d bytes, more than %d", engine.ErrInvalidConfig, quotePrefix(iv.Table), len(iv.Table), maxNameText)
	}
	if err := checkText(iv.Table); err != nil {
		return nil, fmt.Errorf("%w: sharding.Interval.Table %v", engine.ErrInvalidConfig, err)
	}
	open, close := strings.Index(iv.Table, "{"), strings.LastIndex(iv.Table, "}")
	if open < 0 || close <= open+1 || strings.ContainsAny(iv.Table[:open]+iv.Table[close+1:], "{}") {
		return nil, fmt.Errorf("%w: sharding.Interval.Table %q: want a date layout in braces, e.g. \"order_{200601}\"", engine.ErrInvalidConfig, iv.Table)
	}
	if !iv.Start.IsZero() && !iv.End.IsZero() && !iv.End.After(iv.Start) {
		return nil, fmt.Errorf("%w: sharding.Interval end %s is not after start %s", engine.ErrInvalidConfig,
			iv.End.Format(time.RFC3339Nano), iv.Start.Format(time.RFC3339Nano))
	}
	r := &intervalRouter{cfg: iv, prefix: iv.Table[:open], suffix: iv.Table[close+1:], format: iv.Table[open+1 : close]}
	var errs []error
	for _, p := range []period{daily, monthly, yearly} {
		r.period = p
		err := r.checkFormat()
		if err == nil {
			break
		}
		if errors.Is(err, errUnsafeName) {
			return nil, err
		}
		errs = append(errs, err)
		r.period = 0
	}
	if r.period == 0 {
		return nil, fmt.Errorf("%w: sharding.Interval.Table %q: the layout must tell every day, month or year apart and hold no field finer than it (%v)",
			engine.ErrInvalidConfig, iv.Table, errors.Join(errs...))
	}
	if !iv.Start.IsZero() && !iv.End.IsZero() {
		if n := r.span(iv.Start, iv.End); n > maxShards {
			return nil, fmt.Errorf("%w: sharding.Interval Start %s to End %s spans %d %s tables, more than %d",
				engine.ErrInvalidConfig, iv.Start.Format(time.RFC3339Nano), iv.End.Format(time.RFC3339Nano), n, r.period, maxShards)
		}
	}
	return &Router{r: r}, nil
}

var errUnsafeName = errors.New("unsafe table name")

// checkFormat checks the layout names the buckets of r.period apart: a
// span longer than a year of buckets, each with one name from its first
// instant to its last.
func (r *intervalRouter) checkFormat() error {
	if r.cfg.Start.IsZero() {
		r.anchor = r.bucket(r.cfg.Layout.Epoch)
	} else {
		r.anchor = r.bucket(r.cfg.Start)
	}
	seen := map[string]bool{}
	for b := r.anchor; b < r.anchor+400; b++ {
		name := r.name(b)
		if seen[name] {
			return fmt.Errorf("%s: %q for more than one bucket", r.period, name)
		}
		if last := r.prefix + r.date(b+1).Add(-time.Nanosecond).Format(r.format) + r.suffix; last != name {
			return fmt.Errorf("%s: one bucket both %q and %q", r.period, name, last)
		}
		if err := checkTableName(name); err != nil {
			return fmt.Errorf("%w: %w", errUnsafeName, err)
		}
		seen[name] = true
	}
	return nil
}

// bucket numbers the calendar bucket holding t in the router's location:
// the year, months since year 0, or days since 1970-01-01.
func (r *intervalRouter) bucket(t time.Time) int64 {
	y, m, d := t.In(r.cfg.Location).Date()
	switch r.period {
	case yearly:
		return int64(y)
	case monthly:
		return int64(y)*12 + int64(m-1)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// date is the first day of bucket b as a UTC date with the same calendar
// fields, for naming (zone-free, so DST never shifts it).
func (r *intervalRouter) date(b int64) time.Time {
	switch r.period {
	case yearly:
		return time.Date(int(b), 1, 1, 0, 0, 0, 0, time.UTC)
	case monthly:
		return time.Date(int(b/12), time.Month(b%12+1), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Unix(b*86400, 0).UTC()
}

func (r *intervalRouter) name(b int64) string {
	return r.prefix + r.date(b).Format(r.format) + r.suffix
}

func (r *intervalRouter) shard(b int64) Shard {
	return Shard{TableName: r.name(b)}
}

func (r *intervalRouter) inRange(t time.Time) bool {
	return (r.cfg.Start.IsZero() || !t.Before(r.cfg.Start)) && (r.cfg.End.IsZero() || t.Before(r.cfg.End))
}

func (r *intervalRouter) rangeString() string {
	f := func(t time.Time) string {
		if t.IsZero() {
			return "open"
		}
		return t.In(r.cfg.Location).Format(time.RFC3339Nano)
	}
	return "[" + f(r.cfg.Start) + ", " + f(r.cfg.End) + ")"
}

// route decodes id's timestamp and returns its bucket's table. An ID the
// layout cannot hold, one issued outside [Start, End), or one issued more
// than maxAhead after the router's clock is an error wrapping
// engine.ErrInvalidID.
func (r *intervalRouter) route(id int64) (Shard, error) {
	at, _, _, err := r.cfg.Layout.Decode(id)
	if err != nil {
		return Shard{}, err
	}
	if !r.inRange(at) {
		return Shard{}, fmt.Errorf("%w: id %d was issued at %s, outside the router's range %s",
			engine.ErrInvalidID, id, at.In(r.cfg.Location).Format(time.RFC3339Nano), r.rangeString())
	}
	if now := r.cfg.Clock.Now(); at.After(now.Add(maxAhead)) {
		return Shard{}, fmt.Errorf("%w: id %d reads as issued at %s, %s after now: was it made with another layout than the router's %s?",
			engine.ErrInvalidID, id, at.In(r.cfg.Location).Format(time.RFC3339Nano), at.Sub(now).Round(time.Second), snowlayout.Describe(r.cfg.Layout))
	}
	return r.shard(r.bucket(at)), nil
}

func (r *intervalRouter) tables(from, to time.Time) ([]string, error) {
	shards, err := r.between(from, to)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(shards))
	for i, s := range shards {
		out[i] = s.TableName
	}
	return out, nil
}

// span counts the buckets [from, to) touches; 0 when to is not after from.
func (r *intervalRouter) span(from, to time.Time) int64 {
	if !to.After(from) {
		return 0
	}
	return r.bucket(to.Add(-time.Nanosecond)) - r.bucket(from) + 1
}

func (r *intervalRouter) between(from, to time.Time) ([]Shard, error) {
	if !r.cfg.Start.IsZero() && from.Before(r.cfg.Start) {
		from = r.cfg.Start
	}
	if !r.cfg.End.IsZero() && to.After(r.cfg.End) {
		to = r.cfg.End
	}
	n := r.span(from, to)
	if n > maxShards {
		return nil, fmt.Errorf("%w: %s to %s spans %d %s tables, more than %d",
			engine.ErrInvalidConfig, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), n, r.period, maxShards)
	}
	if n == 0 {
		return nil, nil
	}
	first := r.bucket(from)
	out := make([]Shard, n)
	for i := range out {
		out[i] = r.shard(first + int64(i))
	}
	return out, nil
}

func (r *intervalRouter) shards() ([]Shard, error) {
	if r.cfg.Start.IsZero() || r.cfg.End.IsZero() {
		return nil, fmt.Errorf("%w: interval router %s has an open range %s: set Start and End to list its tables",
			engine.ErrInvalidConfig, r.cfg.Table, r.rangeString())
	}
	return r.between(r.cfg.Start, r.cfg.End)
}

func (r *intervalRouter) String() string { return r.cfg.Table }
