package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/idforge/idforge/internal/snowlayout"
)

func setupLayout(fs *flag.FlagSet) runFunc {
	layout := enumVar(fs, "layout", "default", layoutNames(), "bit `layout`")
	return func(_ context.Context, args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		l := layoutByName(layout.value)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		rows := [][2]string{
			{"layout", fmt.Sprintf("%s: %s", layout.value, snowlayout.Describe(l))},
			{"bits", fmt.Sprintf("%d timestamp (%s) + %d machine + %d sequence = %d",
				l.TimestampBits, snowlayout.UnitName(l), l.MachineBits, l.SequenceBits, l.TimestampBits+l.MachineBits+l.SequenceBits)},
			{"IDs per tick", fmt.Sprintf("%d (one tick = 1 %s)", snowlayout.IDsPerTick(l), snowlayout.UnitName(l))},
			{"IDs per second", fmt.Sprint(snowlayout.IDsPerSecond(l))},
			{"machines", fmt.Sprintf("%d (IDs 0 to %d)", snowlayout.MaxMachineID(l)+1, snowlayout.MaxMachineID(l))},
			{"largest ID", fmt.Sprint(snowlayout.MaxID(l))},
			{"runs out", snowlayout.Expiry(l).Format(timestampLayout)},
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
		}
		if left := time.Until(snowlayout.Expiry(l)); left < 10*365*24*time.Hour {
			fmt.Fprintf(tw, "warning\tless than 10 years left: IDs fail with a timestamp overflow after that date\n")
		}
		return tw.Flush()
	}
}
