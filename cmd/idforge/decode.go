package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
	"github.com/idforge/idforge/internal/uuidv7"
)

// timestampLayout is RFC 3339 with milliseconds; in UTC it ends in Z.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// decoded is decode's output, as /v1/decode answers. The ID is a JSON
// string (engine.ID), so that JavaScript reads it exactly.
type decoded struct {
	ID        engine.ID `json:"id"`
	Timestamp string    `json:"timestamp"`
	Machine   int64     `json:"machine"`
	Sequence  int64     `json:"sequence"`
	Friendly  string    `json:"friendly"`
}

// decodedUUID is decode's output for a version 7 UUID, as /v1/decode's.
type decodedUUID struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Timestamp string `json:"timestamp"`
}

// plausible bounds the time of a snowflake ID decode takes for real: one
// made within this much of its layout's epoch is far more likely a small
// number of another kind (a chain ID, an auto-increment key), and none is
// made this far past the clock.
const (
	nearEpoch = time.Hour
	pastNow   = time.Minute
)

func setupDecode(fs *flag.FlagSet) runFunc {
	layout := enumVar(fs, "layout", "default", layoutNames(), "bit `layout`")
	format := enumVar(fs, "format", "", formatNames, "input `format`; without it decimal, or friendly if the ID has a dash; a UUIDv7 is read as it is")
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) != 1 {
			return usagef("want one ID, got %d arguments %q", len(args), args)
		}
		if u, err := uuid.Parse(args[0]); err == nil && len(args[0]) == 36 && format.value == "" {
			at, err := uuidv7.Time(u)
			if err != nil {
				return usagef("%s: a version %d UUID carries no time; only version 7 UUIDs decode", args[0], u.Version())
			}
			return json.NewEncoder(stdout).Encode(decodedUUID{ID: u.String(), Kind: "uuidv7", Timestamp: at.Format(timestampLayout)})
		}
		l := layoutByName(layout.value)
		name := format.value
		if name == "" {
			name = guessFormat(args[0])
		}
		f, err := formatter(name, l)
		if err != nil {
			return err
		}
		out, at, err := decode(l, f, args[0])
		if err != nil {
			if format.value == "" && strings.ContainsFunc(args[0], unicode.IsLetter) {
				err = fmt.Errorf("%w (a radix-62 or radix-36 ID needs -format radix62 or -format radix36)", err)
			}
			return usageError{err}
		}
		if why := implausible(l, at, time.Now()); why != "" {
			fmt.Fprintf(stderr, "idforge decode: warning: %s cannot be a snowflake ID of layout %s: %s\n", args[0], layout.value, why)
		}
		return json.NewEncoder(stdout).Encode(out)
	}
}

// implausible says why an ID of l made at t is no snowflake ID a
// generator of l made by now, or "".
func implausible(l snowflake.Layout, t, now time.Time) string {
	switch {
	case t.Before(l.Epoch.Add(nearEpoch)):
		return fmt.Sprintf("it is too small: its time would be %s, within an hour of the layout's epoch; chain, segment and auto-increment IDs are this small",
			t.Format(timestampLayout))
	case t.After(now.Add(pastNow)):
		return fmt.Sprintf("its time %s is in the future", t.Format(timestampLayout))
	}
	return ""
}

// guessFormat tells a friendly ID (20261121232714123-7-3) from a decimal
// one; a leading minus is a (bad) decimal.
func guessFormat(s string) string {
	if strings.Contains(strings.TrimPrefix(s, "-"), "-") {
		return "friendly"
	}
	return "decimal"
}

// decode reads s in format f as an ID of l and takes it apart: the output
// and the ID's time.
func decode(l snowflake.Layout, f snowlayout.Formatter, s string) (decoded, time.Time, error) {
	id, err := f.Parse(s)
	if err != nil {
		return decoded{}, time.Time{}, err
	}
	at, machine, seq, err := l.Decode(id)
	if err != nil {
		return decoded{}, time.Time{}, err
	}
	return decoded{
		ID:        engine.ID(id),
		Timestamp: at.UTC().Format(timestampLayout),
		Machine:   machine,
		Sequence:  seq,
		Friendly:  snowlayout.Friendly(l, id),
	}, at, nil
}
