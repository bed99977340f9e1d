package sharding

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
)

// Period is the length of one time bucket of an [Interval] router.
type Period int

// Periods. Buckets follow the calendar of the router's location.
const (
	Yearly  Period = iota + 1 // order_2026
	Monthly                   // order_202611
	Daily                     // order_20261121
)

// String returns "yearly", "monthly" or "daily".
func (p Period) String() string {
	switch p {
	case Yearly:
		return "yearly"
	case Monthly:
		return "monthly"
	case Daily:
		return "daily"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

func (p Period) defaultFormat() string {
	switch p {
	case Yearly:
		return "2006"
	case Monthly:
		return "200601"
	}
	return "20060102"
}

// Interval configures a router that puts each row in the table of the time
// bucket its snowflake ID was issued in: the ID's own timestamp, decoded with
// Layout, no lookup. Build it with [NewInterval].
type Interval struct {
	// Layout decodes the IDs; it must be the layout of the generator that
	// issued them.
	Layout snowflake.Layout
	// Period is the bucket length: Yearly, Monthly or Daily.
	Period Period
	// Prefix starts every table name, e.g. "order_".
	Prefix string
	// Format is the Go time layout of the date part of the name, default
	// "2006", "200601" or "20060102" by Period. It may hold no field finer
	// than the period (no hour in a daily format, no day in a monthly
	// one): every time of a bucket must give the bucket's name.
	Format string
	// Location is the time zone whose calendar draws the buckets; nil means UTC.
	Location *time.Location
	// Start and End optionally bound the routable time range [Start, End):
	// an ID outside is an error, and [IntervalRouter.Shards] lists the
	// tables in between. A zero value leaves that side open.
	Start, End time.Time
	// Database names the single database the tables live in (optional).
	Database string
	// Clock tells the time Route compares IDs with; nil means clock.System.
	// An ID issued more than [MaxAhead] after its Now is refused: its
	// timestamp was read with another layout than the one it was made
	// with (a seconds ID read in milliseconds lands weeks ahead).
	Clock clock.Clock
}

// MaxAhead is how far ahead of the router's clock an ID's timestamp may be
// (clocks of the machines issuing IDs differ by less).
const MaxAhead = time.Minute

// IntervalRouter is a validated [Interval]. It is safe for concurrent use.
type IntervalRouter struct {
	cfg    Interval
	anchor int64 // bucket of Start, or of the layout's epoch: table index 0
}

// NewInterval validates cfg and builds the router. A bad layout wraps
// engine.ErrInvalidLayout; an unknown period, an empty or inverted range, a
// range [Start, End) of more than [MaxShards] buckets, or a name format
// that repeats names or holds fields finer than the period wraps
// engine.ErrInvalidConfig.
func NewInterval(cfg Interval) (*IntervalRouter, error) {
	if err := cfg.Layout.Validate(); err != nil {
		return nil, err
	}
	if cfg.Period < Yearly || cfg.Period > Daily {
		return nil, fmt.Errorf("%w: sharding.Interval period %v (use Yearly, Monthly or Daily)", engine.ErrInvalidConfig, cfg.Period)
	}
	if cfg.Format == "" {
		cfg.Format = cfg.Period.defaultFormat()
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	if !cfg.Start.IsZero() && !cfg.End.IsZero() && !cfg.End.After(cfg.Start) {
		return nil, fmt.Errorf("%w: sharding.Interval end %s is not after start %s", engine.ErrInvalidConfig,
			cfg.End.Format(time.RFC3339Nano), cfg.Start.Format(time.RFC3339Nano))
	}
	r := &IntervalRouter{cfg: cfg}
	if !cfg.Start.IsZero() && !cfg.End.IsZero() {
		if n := r.span(cfg.Start, cfg.End); n > MaxShards {
			return nil, fmt.Errorf("%w: sharding.Interval Start %s to End %s spans %d %s tables, more than sharding.MaxShards (%d)",
				engine.ErrInvalidConfig, cfg.Start.Format(time.RFC3339Nano), cfg.End.Format(time.RFC3339Nano), n, cfg.Period, MaxShards)
		}
	}
	if cfg.Start.IsZero() {
		r.anchor = r.bucket(cfg.Layout.Epoch)
	} else {
		r.anchor = r.bucket(cfg.Start)
	}
	// A format without the fields that tell buckets apart repeats names
	// within a year or so: check a span longer than a year of buckets.
	seen := map[string]bool{}
	for b := r.anchor; b < r.anchor+400; b++ {
		name := r.name(b)
		if seen[name] {
			return nil, fmt.Errorf("%w: sharding.Interval %s format %q gives %q for more than one bucket",
				engine.ErrInvalidConfig, cfg.Period, cfg.Format, name)
		}
		// The bucket's last instant must name it as its first does.
		if last := cfg.Prefix + r.date(b+1).Add(-time.Nanosecond).Format(cfg.Format); last != name {
			return nil, fmt.Errorf("%w: sharding.Interval %s format %q names one bucket both %q and %q: use date fields no finer than the period",
				engine.ErrInvalidConfig, cfg.Period, cfg.Format, name, last)
		}
		if err := checkTableName(name); err != nil {
			return nil, err
		}
		seen[name] = true
	}
	return r, nil
}

// bucket numbers the calendar bucket holding t in the router's location:
// the year, months since year 0, or days since 1970-01-01.
func (r *IntervalRouter) bucket(t time.Time) int64 {
	y, m, d := t.In(r.cfg.Location).Date()
	switch r.cfg.Period {
	case Yearly:
		return int64(y)
	case Monthly:
		return int64(y)*12 + int64(m-1)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// date is the first day of bucket b as a UTC date with the same calendar
// fields, for naming (zone-free, so DST never shifts it).
func (r *IntervalRouter) date(b int64) time.Time {
	switch r.cfg.Period {
	case Yearly:
		return time.Date(int(b), 1, 1, 0, 0, 0, 0, time.UTC)
	case Monthly:
		return time.Date(int(b/12), time.Month(b%12+1), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Unix(b*86400, 0).UTC()
}

func (r *IntervalRouter) name(b int64) string { return r.cfg.Prefix + r.date(b).Format(r.cfg.Format) }

func (r *IntervalRouter) shard(b int64) Shard {
	return Shard{Table: int(b - r.anchor), DatabaseName: r.cfg.Database, TableName: r.name(b)}
}

func (r *IntervalRouter) inRange(t time.Time) bool {
	return (r.cfg.Start.IsZero() || !t.Before(r.cfg.Start)) && (r.cfg.End.IsZero() || t.Before(r.cfg.End))
}

func (r *IntervalRouter) rangeString() string {
	f := func(t time.Time) string {
		if t.IsZero() {
			return "open"
		}
		return t.In(r.cfg.Location).Format(time.RFC3339Nano)
	}
	return "[" + f(r.cfg.Start) + ", " + f(r.cfg.End) + ")"
}

// Route decodes id's timestamp and returns its bucket's table. An ID the
// layout cannot hold, one issued outside [Start, End), or one issued more
// than [MaxAhead] after the router's clock is an error wrapping
// engine.ErrInvalidID. Table indexes count buckets from Start (or
// from the layout's epoch when Start is open).
func (r *IntervalRouter) Route(id int64) (Shard, error) {
	if id < 0 {
		return Shard{}, negativeID(id)
	}
	p, err := r.cfg.Layout.Decode(id)
	if err != nil {
		return Shard{}, err
	}
	if !r.inRange(p.Time) {
		return Shard{}, fmt.Errorf("%w: id %d was issued at %s, outside the router's range %s",
			engine.ErrInvalidID, id, p.Time.In(r.cfg.Location).Format(time.RFC3339Nano), r.rangeString())
	}
	if now := r.cfg.Clock.Now(); p.Time.After(now.Add(MaxAhead)) {
		return Shard{}, fmt.Errorf("%w: id %d reads as issued at %s, %s after now: was it made with another layout than the router's %s?",
			engine.ErrInvalidID, id, p.Time.In(r.cfg.Location).Format(time.RFC3339Nano), p.Time.Sub(now).Round(time.Second), r.cfg.Layout)
	}
	return r.shard(r.bucket(p.Time)), nil
}

// TableFor returns the table of time t, an error wrapping
// engine.ErrInvalidConfig when t is outside [Start, End).
func (r *IntervalRouter) TableFor(t time.Time) (string, error) {
	if !r.inRange(t) {
		return "", fmt.Errorf("%w: %s is outside the router's range %s",
			engine.ErrInvalidConfig, t.In(r.cfg.Location).Format(time.RFC3339Nano), r.rangeString())
	}
	return r.name(r.bucket(t)), nil
}

// Tables lists, oldest first, the tables holding rows issued in [from, to):
// the tables a query over that time range must read. The range is clipped to
// [Start, End); an empty range gives nil. A range of more than [MaxShards]
// tables is an error wrapping engine.ErrInvalidConfig.
func (r *IntervalRouter) Tables(from, to time.Time) ([]string, error) {
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
func (r *IntervalRouter) span(from, to time.Time) int64 {
	if !to.After(from) {
		return 0
	}
	return r.bucket(to.Add(-time.Nanosecond)) - r.bucket(from) + 1
}

func (r *IntervalRouter) between(from, to time.Time) ([]Shard, error) {
	if !r.cfg.Start.IsZero() && from.Before(r.cfg.Start) {
		from = r.cfg.Start
	}
	if !r.cfg.End.IsZero() && to.After(r.cfg.End) {
		to = r.cfg.End
	}
	n := r.span(from, to)
	if n > MaxShards {
		return nil, fmt.Errorf("%w: %s to %s spans %d %s tables, more than sharding.MaxShards (%d)",
			engine.ErrInvalidConfig, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), n, r.cfg.Period, MaxShards)
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

// Shards lists the tables of [Start, End). With either side open the list
// is endless and Shards returns an error wrapping engine.ErrInvalidConfig.
func (r *IntervalRouter) Shards() ([]Shard, error) {
	if r.cfg.Start.IsZero() || r.cfg.End.IsZero() {
		return nil, fmt.Errorf("%w: interval router %s has an open range %s: set Start and End to list its tables",
			engine.ErrInvalidConfig, r.cfg.Prefix+r.cfg.Format, r.rangeString())
	}
	return r.between(r.cfg.Start, r.cfg.End)
}
