package snowflake

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
)

// FriendlyFormatter is the friendly form ([Layout.Friendly],
// [Layout.ParseFriendly]) as an [engine.Formatter].
func (l Layout) FriendlyFormatter() engine.Formatter { return friendlyFormatter{l} }

type friendlyFormatter struct{ l Layout }

func (f friendlyFormatter) Format(id int64) string        { return f.l.Friendly(id) }
func (f friendlyFormatter) Parse(s string) (int64, error) { return f.l.ParseFriendly(s) }

// Friendly returns id in its friendly form
// `{yyyyMMddHHmmssSSS}-{machine}-{sequence}`, the time in UTC, for example
// 20260623131730192-1-0. Second layouts use the same 17-digit form with SSS
// always 000, so every friendly string sorts and parses alike. Years past 9999
// take more digits. An ID the layout cannot hold (see [Layout.Decode]) gives
// the empty string.
func (l Layout) Friendly(id int64) string {
	p, err := l.Decode(id)
	if err != nil {
		return ""
	}
	var buf [48]byte
	return string(appendFriendly(buf[:0], p))
}

func appendFriendly(b []byte, p Parts) []byte {
	t := p.Time
	b = appendDigits(b, int64(t.Year()), 4)
	for _, v := range [...]int{int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()} {
		b = appendDigits(b, int64(v), 2)
	}
	b = appendDigits(b, int64(t.Nanosecond()/1e6), 3)
	b = append(b, '-')
	b = strconv.AppendInt(b, p.Machine, 10)
	b = append(b, '-')
	return strconv.AppendInt(b, p.Sequence, 10)
}

// appendDigits appends v left-padded with zeros to width digits.
func appendDigits(b []byte, v int64, width int) []byte {
	for n := len(strconv.FormatInt(v, 10)); n < width; n++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, v, 10)
}

// ParseFriendly reads the form written by [Layout.Friendly] back into the
// ID. Anything else (wrong shape, impossible date, non-canonical digits, a
// time, machine or sequence the layout cannot hold) is an error wrapping
// engine.ErrInvalidID.
func (l Layout) ParseFriendly(s string) (int64, error) {
	id, err := l.parseFriendly(s)
	if err != nil {
		return 0, fmt.Errorf("%w: friendly %q for %s: %w", engine.ErrInvalidID, s, l, err)
	}
	return id, nil
}

func (l Layout) parseFriendly(s string) (int64, error) {
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
	if l.Unit == Second && ms != 0 {
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
	id, err := l.Compose(t, m, q)
	if err != nil {
		return 0, err
	}
	if l.Friendly(id) != s { // leading zeros in the year and the like
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
