// Package snowlayout answers what the server, the CLI and the tests ask of
// a snowflake layout beyond decoding: its capacity and expiry, composing an
// ID from its parts, and the friendly form
// `{yyyyMMddHHmmssSSS}-{machine}-{sequence}`, and a layout's description
// (the layout's own String). Everything is computed from the layout's
// public fields. It imports engine and engine/snowflake.
package snowlayout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// check reports a layout that cannot hold IDs: Decode checks the layout's
// shape (not its epoch against the clock) before anything else, and 0 is in
// range of every valid layout.
func check(l snowflake.Layout) error {
	_, _, _, err := l.Decode(0)
	return err
}

// seconds reports whether l ticks in seconds (a zero Unit is a millisecond).
func seconds(l snowflake.Layout) bool { return l.Unit == time.Second }

// Describe names l for errors and listings, e.g. "41/10/12 ms since
// 2019-12-24T16:00:00Z": [snowflake.Layout.String], as the generator's own
// errors do.
func Describe(l snowflake.Layout) string { return l.String() }

// mask returns 2^bits - 1, or 0 for a bit count outside [0, 63].
func mask(bits int) int64 {
	if bits < 0 || bits > 63 {
		return 0
	}
	return int64(uint64(1)<<bits - 1)
}

// MaxID is the largest ID of l: 2^(all bits) - 1 (2^53-1 for JSSafe).
func MaxID(l snowflake.Layout) int64 { return mask(l.TimestampBits + l.MachineBits + l.SequenceBits) }

// MaxMachineID is the largest machine ID: 2^MachineBits - 1.
func MaxMachineID(l snowflake.Layout) int64 { return mask(l.MachineBits) }

// MaxSequence is the largest sequence number within a tick: 2^SequenceBits - 1.
func MaxSequence(l snowflake.Layout) int64 { return mask(l.SequenceBits) }

// MaxTick is the last tick the timestamp bits can hold: 2^TimestampBits - 1.
func MaxTick(l snowflake.Layout) int64 { return mask(l.TimestampBits) }

// IDsPerTick is how many IDs one machine can issue per tick.
func IDsPerTick(l snowflake.Layout) int64 { return MaxSequence(l) + 1 }

// IDsPerSecond is how many IDs one machine can issue per second.
func IDsPerSecond(l snowflake.Layout) int64 {
	if seconds(l) {
		return IDsPerTick(l)
	}
	return IDsPerTick(l) * 1000
}

// Expiry is the moment the timestamp runs out: Epoch + 2^TimestampBits ticks.
// A generator fails with engine.ErrTimestampOverflow from then on.
func Expiry(l snowflake.Layout) time.Time { return tickTime(l, MaxTick(l)+1) }

// tickTime is the start of a tick, in UTC.
func tickTime(l snowflake.Layout, tick int64) time.Time {
	if seconds(l) {
		return time.Unix(l.Epoch.Unix()+tick, 0).UTC()
	}
	return time.UnixMilli(l.Epoch.UnixMilli() + tick).UTC()
}

// overflow is the generator's error for a time past l's last tick.
func overflow(l snowflake.Layout, t time.Time) error {
	return fmt.Errorf("%w: %s is past the end of %s (%s)", engine.ErrTimestampOverflow,
		t.UTC().Format(time.RFC3339Nano), l, Expiry(l).Format(time.RFC3339Nano))
}

// Tick returns the tick of l holding t (t rounded down to the unit).
func Tick(l snowflake.Layout, t time.Time) (int64, error) {
	if err := check(l); err != nil {
		return 0, err
	}
	if t.Before(l.Epoch) {
		return 0, fmt.Errorf("%w: %s is before the epoch of %s", engine.ErrInvalidID, t.UTC().Format(time.RFC3339Nano), Describe(l))
	}
	// t - epoch as whole seconds plus nanoseconds, without time.Duration's 292-year limit.
	secs := t.Unix() - l.Epoch.Unix()
	nanos := int64(t.Nanosecond() - l.Epoch.Nanosecond())
	if nanos < 0 {
		secs, nanos = secs-1, nanos+1e9
	}
	tick := secs
	if !seconds(l) {
		if secs > MaxTick(l)/1000 {
			return 0, overflow(l, t)
		}
		tick = secs*1000 + nanos/1e6
	}
	if tick > MaxTick(l) {
		return 0, overflow(l, t)
	}
	return tick, nil
}

// Compose builds the ID for time t (rounded down to the unit), machine and
// sequence. Parts out of range are errors wrapping engine.ErrInvalidID, a
// time past the layout's [Expiry] wraps engine.ErrTimestampOverflow.
func Compose(l snowflake.Layout, t time.Time, machine, seq int64) (int64, error) {
	tick, err := Tick(l, t)
	if err != nil {
		return 0, err
	}
	return ComposeTick(l, tick, machine, seq)
}

// ComposeTick is [Compose] with the tick given directly.
func ComposeTick(l snowflake.Layout, tick, machine, seq int64) (int64, error) {
	if err := check(l); err != nil {
		return 0, err
	}
	switch {
	case tick < 0:
		return 0, fmt.Errorf("%w: tick %d is negative", engine.ErrInvalidID, tick)
	case tick > MaxTick(l):
		return 0, fmt.Errorf("%w: tick %d exceeds %d of %s", engine.ErrTimestampOverflow, tick, MaxTick(l), Describe(l))
	case machine < 0 || machine > MaxMachineID(l):
		return 0, fmt.Errorf("%w: machine %d is outside [0, %d] of %s", engine.ErrInvalidID, machine, MaxMachineID(l), Describe(l))
	case seq < 0 || seq > MaxSequence(l):
		return 0, fmt.Errorf("%w: sequence %d is outside [0, %d] of %s", engine.ErrInvalidID, seq, MaxSequence(l), Describe(l))
	}
	return tick<<(l.MachineBits+l.SequenceBits) | machine<<l.SequenceBits | seq, nil
}

// Formatter writes IDs as strings and reads them back: a
// *convert.Formatter, or the friendly form of a layout ([FriendlyFormat]).
// The CLI and `idforge serve` pick one by name.
type Formatter interface {
	Format(id int64) string
	Parse(s string) (int64, error)
}

// FriendlyFormat is the friendly form ([Friendly], [ParseFriendly]) as a
// [Formatter].
func FriendlyFormat(l snowflake.Layout) Formatter { return friendlyFormatter{l} }

type friendlyFormatter struct{ l snowflake.Layout }

func (f friendlyFormatter) Format(id int64) string        { return Friendly(f.l, id) }
func (f friendlyFormatter) Parse(s string) (int64, error) { return ParseFriendly(f.l, s) }

// Friendly returns id in its friendly form
// `{yyyyMMddHHmmssSSS}-{machine}-{sequence}`, the time in UTC, for example
// 20260623131730192-1-0. Second layouts use the same 17-digit form with SSS
// always 000, so every friendly string sorts and parses alike. Years past 9999
// take more digits. An ID the layout cannot hold (see Layout.Decode) gives
// the empty string.
func Friendly(l snowflake.Layout, id int64) string {
	t, machine, seq, err := l.Decode(id)
	if err != nil {
		return ""
	}
	var buf [48]byte
	return string(appendFriendly(buf[:0], t, machine, seq))
}

func appendFriendly(b []byte, t time.Time, machine, seq int64) []byte {
	b = appendDigits(b, int64(t.Year()), 4)
	for _, v := range [...]int{int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()} {
		b = appendDigits(b, int64(v), 2)
	}
	b = appendDigits(b, int64(t.Nanosecond()/1e6), 3)
	b = append(b, '-')
	b = strconv.AppendInt(b, machine, 10)
	b = append(b, '-')
	return strconv.AppendInt(b, seq, 10)
}

// appendDigits appends v left-padded with zeros to width digits.
func appendDigits(b []byte, v int64, width int) []byte {
	for n := len(strconv.FormatInt(v, 10)); n < width; n++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, v, 10)
}

// ParseFriendly reads the form written by [Friendly] back into the
// ID. Anything else (wrong shape, impossible date, non-canonical digits, a
// time, machine or sequence the layout cannot hold) is an error wrapping
// engine.ErrInvalidID.
func ParseFriendly(l snowflake.Layout, s string) (int64, error) {
	id, err := parseFriendly(l, s)
	if err != nil {
		return 0, fmt.Errorf("%w: friendly %q for %s: %w", engine.ErrInvalidID, s, Describe(l), err)
	}
	return id, nil
}

func parseFriendly(l snowflake.Layout, s string) (int64, error) {
	ts, rest, ok1 := strings.Cut(s, "-")
	mach, seq, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 {
		return 0, errors.New("want {yyyyMMddHHmmssSSS}-{machine}-{sequence}")
	}
	if len(ts) < 17 || !allDigits(ts) {
		return 0, errors.New("the time must be 17 digits yyyyMMddHHmmssSSS")
	}
	y := len(ts) - 13 // the year takes whatever the fixed-width fields leave
	num := func(from, to int) int { v, _ := strconv.Atoi(ts[from:to]); return v }
	year, month, day := num(0, y), num(y, y+2), num(y+2, y+4)
	hour, minute, sec, ms := num(y+4, y+6), num(y+6, y+8), num(y+8, y+10), num(y+10, y+13)
	t := time.Date(year, time.Month(month), day, hour, minute, sec, ms*1e6, time.UTC)
	if t.Year() != year || int(t.Month()) != month || t.Day() != day ||
		t.Hour() != hour || t.Minute() != minute || t.Second() != sec {
		return 0, errors.New("no such date and time")
	}
	if seconds(l) && ms != 0 {
		return 0, errors.New("a second layout's friendly form ends in 000 milliseconds")
	}
	m, err := parseCanonical(mach)
	if err != nil {
		return 0, fmt.Errorf("machine: %w", err)
	}
	q, err := parseCanonical(seq)
	if err != nil {
		return 0, fmt.Errorf("sequence: %w", err)
	}
	id, err := Compose(l, t, m, q)
	if err != nil {
		return 0, err
	}
	if Friendly(l, id) != s { // leading zeros in the year and the like
		return 0, errors.New("not in canonical form")
	}
	return id, nil
}

// parseCanonical reads a non-negative decimal without sign or leading zeros.
func parseCanonical(s string) (int64, error) {
	if s == "" || !allDigits(s) || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a plain decimal number", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// UnitName returns the tick unit of l as the server shows it: "ms" or "s".
func UnitName(l snowflake.Layout) string {
	if seconds(l) {
		return "s"
	}
	return "ms"
}
