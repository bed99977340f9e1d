package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// timestampLayout is RFC 3339 with milliseconds; in UTC it ends in Z.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// decoded is decode's output. The ID is a JSON string (engine.ID), so that
// JavaScript reads it exactly.
type decoded struct {
	ID        engine.ID `json:"id"`
	Timestamp string    `json:"timestamp"`
	Machine   int64     `json:"machine"`
	Sequence  int64     `json:"sequence"`
}

func setupDecode(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
	layout := enumVar(fs, "layout", "default", layoutNames(), "bit `layout`")
	format := enumVar(fs, "format", "", formatNames, "input `format`; without it decimal, or friendly if the ID has a dash")
	return func(_ context.Context, args []string, stdout io.Writer) error {
		if len(args) != 1 {
			return usagef("want one ID after the flags, got %d arguments %q", len(args), args)
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
		p, err := decode(l, f, args[0])
		if err != nil {
			if format.value == "" && strings.ContainsFunc(args[0], unicode.IsLetter) {
				err = fmt.Errorf("%w (a radix-62 or radix-36 ID needs -format radix62 or -format radix36)", err)
			}
			return usageError{err}
		}
		return json.NewEncoder(stdout).Encode(decoded{
			ID:        engine.ID(p.ID),
			Timestamp: p.Time.UTC().Format(timestampLayout),
			Machine:   p.Machine,
			Sequence:  p.Sequence,
		})
	}
}

// guessFormat tells a friendly ID (20261121232714123-7-3) from a decimal
// one; a leading minus is a (bad) decimal.
func guessFormat(s string) string {
	if strings.Contains(strings.TrimPrefix(s, "-"), "-") {
		return "friendly"
	}
	return "decimal"
}

func decode(l snowflake.Layout, f engine.Formatter, s string) (snowflake.Parts, error) {
	id, err := f.Parse(s)
	if err != nil {
		return snowflake.Parts{}, err
	}
	return l.Decode(id)
}
