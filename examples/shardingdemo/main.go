// Command shardingdemo is idforge's main job: it inserts course rows one at a
// time through GORM and the idforge plugin into two databases (m0, m1) of two
// tables each (course_1, course_2), routed by ShardingSphere's rule
//
//	database = m{id % 2}, table = course_{((id+1) % 4)/2 + 1}
//
// once per generator, and shows how evenly each generator's IDs spread:
//
//   - plain-snowflake: the sequence restarts at 0 on every millisecond, as
//     Twitter's snowflake, bwmarrin/snowflake and ShardingSphere's SNOWFLAKE do;
//   - idforge-snowflake: the sequence restarts only past a threshold, on a
//     machine ID distributed by the SQL store;
//   - segment-chain: strictly increasing IDs from a lock-free segment chain
//     over the SQL store.
//
// With no flags it runs on two SQLite files in a temporary folder, no server
// needed. Counts are read back from the databases with COUNT(*).
//
//	go run ./examples/shardingdemo [-n 1000] [-rate 1000] [-json] [-keep]
//	go run ./examples/shardingdemo -dsn 'postgres://postgres@127.0.0.1:5432/{db}?sslmode=disable'
//	go run ./examples/shardingdemo -dsn 'root@tcp(127.0.0.1:3306)/{db}?parseTime=true'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/sharding"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	n      int
	rate   float64
	dsn    string
	prefix string
	keep   bool
	json   bool
}

// run is main without the process: it parses args, runs the demo and returns
// the exit status (2 for bad flags).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shardingdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.n, "n", 1000, "rows to insert per generator")
	fs.Float64Var(&o.rate, "rate", 1000, "inserts per second; 0 for as fast as possible. The default puts each ID in its own millisecond, as when every insert waits on a remote database")
	fs.StringVar(&o.dsn, "dsn", "", "run on MariaDB/MySQL or PostgreSQL instead of SQLite: a DSN with {db} where the database name goes, "+
		"postgres://user@host:5432/{db}?sslmode=disable or user@tcp(host:3306)/{db} (m0 and m1 are <prefix>m0 and <prefix>m1; "+
		"they are created and dropped afterwards unless they exist, in which case their course_1 and course_2 tables are emptied and kept)")
	fs.StringVar(&o.prefix, "prefix", "idforge_demo_", "with -dsn: prefix of the database names (lower-case letters, digits, underscores)")
	fs.BoolVar(&o.keep, "keep", false, "keep the databases for inspection")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of tables")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: shardingdemo [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "shardingdemo: unexpected argument %q\n", fs.Arg(0))
		return 2
	case o.n < 1:
		fmt.Fprintf(stderr, "shardingdemo: -n must be at least 1, got %d\n", o.n)
		return 2
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0):
		fmt.Fprintf(stderr, "shardingdemo: -rate must be a number >= 0, got %v\n", o.rate)
		return 2
	case !prefixRE.MatchString(o.prefix):
		fmt.Fprintf(stderr, "shardingdemo: -prefix must be lower-case letters, digits and underscores, starting with a letter or underscore; got %q\n", o.prefix)
		return 2
	case o.dsn != "" && !strings.Contains(o.dsn, "{db}"):
		fmt.Fprintf(stderr, "shardingdemo: -dsn must contain {db} where the database name goes, got %q\n", o.dsn)
		return 2
	}

	rep, err := demo(ctx, o, progressWriter(stdout, o.json))
	if err != nil {
		fmt.Fprintf(stderr, "shardingdemo: %v\n", err)
		return 1
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "shardingdemo: %v\n", err)
			return 1
		}
		return 0
	}
	printReport(stdout, rep)
	return 0
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// report is the -json output: exactly one object.
type report struct {
	N          int               `json:"n"`
	Rule       string            `json:"rule"`
	Rate       float64           `json:"rate"`
	Databases  string            `json:"databases"`
	Generators []generatorReport `json:"generators"`
	Kept       string            `json:"kept,omitempty"`
}

type generatorReport struct {
	Name   string         `json:"name"`
	Shards map[string]int `json:"shards"`
	// MaxMinRatio is null when a shard is empty (the ratio is infinite and
	// JSON has no infinity).
	MaxMinRatio  *float64 `json:"max_min_ratio"`
	ChiSquareP   float64  `json:"chi2_p"`
	RowsReadBack int      `json:"rows_read_back"`
	Verdict      string   `json:"verdict"`
}

func newGeneratorReport(name string, counts map[string]int) generatorReport {
	maxMin, p := sharding.Measure(counts)
	total, lo, hi := 0, math.MaxInt, 0
	empty := 0
	for _, c := range counts {
		total += c
		lo, hi = min(lo, c), max(hi, c)
		if c == 0 {
			empty++
		}
	}
	r := generatorReport{Name: name, Shards: counts, ChiSquareP: p, RowsReadBack: total}
	if !math.IsInf(maxMin, 0) {
		r.MaxMinRatio = &maxMin
	}
	switch {
	case hi-lo <= 1:
		r.Verdict = fmt.Sprintf("even: max/min %.2f, as even as %d rows over %d shards can be", maxMin, total, len(counts))
	case empty > 0:
		r.Verdict = fmt.Sprintf("skewed: %d of %d shards empty, the rest take all the rows", empty, len(counts))
	case maxMin <= 1.05:
		r.Verdict = fmt.Sprintf("even: max/min %.2f (target <= 1.05)", maxMin)
	default:
		r.Verdict = fmt.Sprintf("uneven: max/min %.2f (target <= 1.05)", maxMin)
	}
	return r
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "%d rows per generator at %s into %s, routed by %s\n\n", rep.N, rateString(rep.Rate), rep.Databases, rep.Rule)
	for _, g := range rep.Generators {
		fmt.Fprintf(w, "%s\n", g.Name)
		fmt.Fprint(w, indent(bars(g.Shards, 40), "  "))
		ratio := "inf"
		if g.MaxMinRatio != nil {
			ratio = fmt.Sprintf("%.2f", *g.MaxMinRatio)
		}
		fmt.Fprintf(w, "  rows read back %d, max/min %s, chi-square p %.3f\n", g.RowsReadBack, ratio, g.ChiSquareP)
		fmt.Fprintf(w, "  => %s\n\n", g.Verdict)
	}
	if rep.Kept != "" {
		fmt.Fprintf(w, "data kept in %s\n", rep.Kept)
	}
}

// bars prints one line per shard, sorted by name: name, count and a bar
// of '#' scaled so the fullest shard gets width characters.
func bars(counts map[string]int, width int) string {
	names := slices.Sorted(maps.Keys(counts))
	pad, most := 0, 0
	for _, n := range names {
		pad, most = max(pad, len(n)), max(most, counts[n])
	}
	var b strings.Builder
	for _, n := range names {
		c := counts[n]
		bar := 0
		if most > 0 {
			bar = int(math.Round(float64(c) * float64(width) / float64(most)))
		}
		fmt.Fprintf(&b, "%-*s %8d", pad, n, c)
		if bar > 0 {
			b.WriteString(" " + strings.Repeat("#", bar))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func rateString(rate float64) string {
	if rate == 0 {
		return "full speed"
	}
	return fmt.Sprintf("%g inserts/s", rate)
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

// progressWriter returns where progress bars go: stdout when it is a
// terminal and the output is not JSON, else nowhere.
func progressWriter(stdout io.Writer, jsonOut bool) io.Writer {
	f, ok := stdout.(*os.File)
	if jsonOut || !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}

// pacer spaces inserts at least 1/rate apart. It never catches up with a
// burst after a slow insert: at the default rate every ID gets a millisecond
// of its own, the low-traffic case this demo is about.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(rate float64) *pacer {
	if rate == 0 {
		return &pacer{}
	}
	return &pacer{interval: time.Duration(float64(time.Second) / rate)}
}

func (p *pacer) wait(ctx context.Context) error {
	if err := clock.System.Sleep(ctx, time.Until(p.next)); err != nil {
		return err
	}
	p.next = time.Now().Add(p.interval)
	return nil
}
