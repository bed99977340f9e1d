package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

func setupGen(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
	n := parsedVar(fs, "n", 1, strconv.Atoi, "want a whole number", "how many IDs to print, a whole `number`")
	machine := parsedVar(fs, "machine", 0, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
		"want a whole number", "machine `ID` (0 to the layout's maximum)")
	layout := enumVar(fs, "layout", "default", layoutNames(), "bit `layout`")
	format := enumVar(fs, "format", "decimal", formatNames, "output `format`")
	return func(ctx context.Context, args []string, stdout io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		if *n < 1 {
			return usagef("-n %d: want at least 1", *n)
		}
		l := layoutByName(layout.value)
		f, err := formatter(format.value, l)
		if err != nil {
			return err
		}
		g, err := snowflake.New(*machine, snowflake.WithLayout(l))
		if err != nil {
			return err
		}
		return gen(ctx, g, f, *n, stdout)
	}
}

// gen writes n IDs from g, one per line. Buffered: a million IDs are a
// handful of writes.
func gen(ctx context.Context, g engine.Generator, f engine.Formatter, n int, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	for range n {
		id, err := g.NextID(ctx)
		if err != nil {
			return err
		}
		w.WriteString(f.Format(id))
		if err := w.WriteByte('\n'); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
