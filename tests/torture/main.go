// Command torture abuses idforge in public and checks that it never issues an
// ID twice and never loses a row. A driver starts P worker processes (copies
// of this binary) that share one real store (PostgreSQL, MariaDB or Redis)
// for machine IDs and segments; each inserts rows keyed by snowflake IDs and
// by segment-chain IDs into tables with a primary key, as fast as it can,
// while the driver kills and restarts workers (kill -9), steps their clocks
// back, cuts the store off through TCP proxies, pauses workers past the
// machine-ID safe-guard so that an intruder reclaims their machine IDs, and
// wipes the store while some workers are cut off from it and a newcomer
// starts on it. At the end it reads every row back and compares it with
// what the workers acknowledged.
//
//	go run ./tests/torture -store postgres -duration 30m -json
//
// The exit status is 0 when the run found no duplicate, lost no row and
// injected every requested fault kind, 1 when a check failed and 2 when the
// run could not be set up. README.md describes the flags, the faults and the
// report.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // a check failed: duplicates, lost rows, a fault never injected...
	exitSetup  = 2 // bad flags, a server down
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the driver's configuration, from the command line.
type config struct {
	store        string
	duration     time.Duration
	workers      int
	seed         uint64
	safeGuard    time.Duration
	heartbeat    time.Duration
	rideThrough  time.Duration
	fence        time.Duration // resolved from -fence
	ahead        time.Duration // every worker chain's Ahead; 0: off
	maxBackwards time.Duration
	batch        int
	rate         int
	faults       []string
	gap          time.Duration
	warmup       time.Duration
	outage       time.Duration // long_outage: how long the store stays unreachable
	json         bool
	verbose      bool
	keep         bool
	brk          string
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var faults string
	var fence fenceFlag
	fs.StringVar(&c.store, "store", "postgres", "shared store for machine IDs and segments: postgres, mariadb or redis (rows go to PostgreSQL for redis)")
	fs.DurationVar(&c.duration, "duration", time.Minute, "how long to run; the first round of faults always completes")
	fs.IntVar(&c.workers, "workers", 6, "worker processes")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the fault schedule (0: random, printed)")
	fs.DurationVar(&c.safeGuard, "safeguard", 3*time.Second, "machine-ID safe-guard duration")
	fs.DurationVar(&c.heartbeat, "heartbeat", 300*time.Millisecond, "machine-ID heartbeat interval")
	fs.DurationVar(&c.rideThrough, "ride-through", time.Second, "the stores' ride-through window (RideThrough of sqlstore and redisstore): how long a worker cut off from the store goes on issuing; each heartbeat reserves this far ahead, so a restart after kill -9 cannot reuse its predecessor's milliseconds even with the clock stepped back; 0 turns the reservation off (then kill_clock_back fails)")
	fs.Var(&fence, "fence", "every worker's chain Fence (segment.Settings.Fence), at most -ride-through: auto is -ride-through when partition_wipe is injected, else 0 (off)")
	fs.DurationVar(&c.ahead, "ahead", 0, "every worker's chain Ahead (segment.Settings.Ahead): keep this much of the measured issue rate fetched ahead, so a chain rides out a store outage that long; at most -fence when the fence is on; 0 is off")
	fs.DurationVar(&c.maxBackwards, "max-backwards", 10*time.Millisecond, "clock step back the snowflake generator waits out; longer ones are refused")
	fs.IntVar(&c.batch, "batch", 200, "rows per INSERT")
	fs.IntVar(&c.rate, "rate", 0, "rows per second per worker and table (0: as fast as possible)")
	fs.StringVar(&faults, "faults", "all", "fault kinds to inject, comma-separated, or all (those the store supports but long_outage) or none: "+
		strings.Join(faultKinds, ","))
	fs.DurationVar(&c.gap, "gap", time.Second, "mean quiet time between faults")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "load before the first fault, once every worker inserts")
	fs.DurationVar(&c.outage, "outage", time.Minute, "how long the long_outage fault keeps the store unreachable")
	fs.BoolVar(&c.json, "json", false, "print the report as one JSON object")
	fs.BoolVar(&c.verbose, "v", false, "forward the workers' logs to stderr")
	fs.BoolVar(&c.keep, "keep", false, "keep the database (and Redis keys) after the run")
	fs.StringVar(&c.brk, "break", "", "test only: run a deliberately broken worker (machine, fence, clock or partition) to show the checks catch it")
	worker := fs.String("worker", "", "internal: run as a worker with this JSON configuration")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: torture -store postgres|mariadb|redis [-duration 30m] [-workers 6] [-json] [flags]\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "worker" {
				return
			}
			fmt.Fprintf(stderr, "  -%s\t%s (default %q)\n", f.Name, f.Usage, f.DefValue)
		})
	}
	if err := fs.Parse(args); err != nil {
		return exitSetup
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "torture: unexpected arguments %q\n", fs.Args())
		return exitSetup
	}
	if *worker != "" {
		return runWorker(ctx, *worker, stdin, stdout, stderr)
	}
	var err error
	if c.faults, err = parseFaults(faults, c.store); err == nil {
		err = c.validate()
	}
	if err == nil {
		c.fence, err = fence.resolve(&c)
	}
	if err != nil {
		fmt.Fprintf(stderr, "torture: %v\n", err)
		return exitSetup
	}
	return runDriver(ctx, c, stdout, stderr)
}

func (c *config) validate() error {
	switch {
	case !slices.Contains([]string{"postgres", "mariadb", "redis"}, c.store):
		return fmt.Errorf("-store %q: want postgres, mariadb or redis", c.store)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: want at least 1", c.workers)
	case c.duration <= 0:
		return fmt.Errorf("-duration %v: want a positive duration", c.duration)
	case c.batch < 1:
		return fmt.Errorf("-batch %d: want at least 1", c.batch)
	case c.rate < 0:
		return fmt.Errorf("-rate %d: want 0 (unlimited) or more", c.rate)
	case c.gap < 0 || c.warmup < 0:
		return fmt.Errorf("-gap %v, -warmup %v: must not be negative", c.gap, c.warmup)
	case c.ahead < 0:
		return fmt.Errorf("-ahead %v: want 0 (off) or a positive duration", c.ahead)
	case c.outage <= 0:
		return fmt.Errorf("-outage %v: want a positive duration", c.outage)
	case c.heartbeat <= 0 || c.heartbeat >= c.safeGuard*4/5:
		// The lease refuses a fifth of the safe-guard early (its skew
		// margin); a heartbeat must land well inside what is left.
		return fmt.Errorf("-heartbeat %v: want a positive interval below 4/5 of -safeguard %v", c.heartbeat, c.safeGuard)
	case c.rideThrough < 0 || c.rideThrough > 0 && c.rideThrough <= c.heartbeat:
		return fmt.Errorf("-ride-through %v: want 0 or longer than -heartbeat %v", c.rideThrough, c.heartbeat)
	case c.rideThrough >= c.safeGuard*4/5:
		// The lease refuses a window it could not keep: past the
		// safe-guard less its skew margin the ID may be reclaimed.
		return fmt.Errorf("-ride-through %v: want it below 4/5 of -safeguard %v", c.rideThrough, c.safeGuard)
	case !slices.Contains(breakModes, c.brk):
		return fmt.Errorf("-break %q: want one of %q", c.brk, breakModes[1:])
	}
	return nil
}

// parseFaults reads the -faults list; "all" means every kind the store
// supports but long_outage (see allFaults).
func parseFaults(s, store string) ([]string, error) {
	switch s {
	case "all":
		return allFaults(store), nil
	case "none", "":
		return nil, nil
	}
	var out []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(faultKinds, k) {
			return nil, fmt.Errorf("-faults: unknown fault kind %q (known: %s)", k, strings.Join(faultKinds, ", "))
		}
		if !slices.Contains(faultsFor(store), k) {
			return nil, fmt.Errorf("-faults: %s needs -store redis (a Redis the driver starts and may empty)", k)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// fenceFlag is -fence: a duration, or auto (its zero value).
type fenceFlag struct {
	d     time.Duration
	given bool // a duration, not auto
}

func (f *fenceFlag) String() string {
	if !f.given {
		return "auto"
	}
	return f.d.String()
}

func (f *fenceFlag) Set(s string) error {
	if s == "auto" {
		*f = fenceFlag{}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*f = fenceFlag{d: d, given: true}
	return nil
}

// resolve returns the fence the workers run with: auto is the reservation
// when partition_wipe is injected, else off. partition_wipe needs it on: a
// worker cut off from the store that is wiped would go on serving the chain
// ranges it held, which a newcomer is handed again; -break partition runs
// exactly that, so it needs it off.
func (f fenceFlag) resolve(c *config) (time.Duration, error) {
	wipes := slices.Contains(c.faults, "partition_wipe") && c.brk != "partition"
	d := f.d
	if !f.given && wipes {
		d = c.rideThrough
	}
	switch {
	case d < 0 || d > c.rideThrough:
		return 0, fmt.Errorf("-fence %v: want 0 (off) up to -ride-through %v: a chain must not serve held IDs after snowflake IDs stop", d, c.rideThrough)
	case c.brk == "partition" && d != 0:
		return 0, fmt.Errorf("-fence %v: -break partition runs the chains without the fence", d)
	case d > 0 && c.ahead > d:
		// The chain refuses it too: past the Fence it stops serving what
		// it holds, so holding more buys nothing.
		return 0, fmt.Errorf("-ahead %v: beyond -fence %v, after which a chain cut off from the store stops serving what it holds", c.ahead, d)
	case wipes && d == 0:
		off := "-fence 0"
		if !f.given {
			off = "-ride-through 0 (the fence is at most the window)"
		}
		return 0, fmt.Errorf("%s with partition_wipe: workers cut off from the wiped store would serve chain IDs a newcomer gets again; "+
			"-break partition runs that on purpose", off)
	}
	return d, nil
}
