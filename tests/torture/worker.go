package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	idforge "github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/reason"
)

// workerConfig is what the driver passes to a worker process (as JSON in the
// hidden -worker flag).
type workerConfig struct {
	Proc         int64 // unique per process in a run; stored with every row
	Instance     string
	Target       int64 // an intruder's machine ID to reclaim; -1 for a regular worker
	Store        string
	StoreDSN     string // through the proxy; the address for Redis
	RedisPrefix  string
	Rows         rowsConfig
	Namespace    string
	SafeGuard    time.Duration
	Heartbeat    time.Duration
	RideThrough  time.Duration
	Fence        time.Duration // the chain's segment.Settings.Fence; 0: off
	Ahead        time.Duration // the chain's segment.Settings.Ahead; 0: off
	MaxBackwards time.Duration
	Batch        int
	Rate         int
	Break        string
	Verbose      bool
	// ClockOffset is the clock's offset at start: a worker restarted on a
	// host whose clock was stepped back while it was down.
	ClockOffset time.Duration
}

// Generators in a worker are retried this often while they refuse.
const retryDelay = 5 * time.Millisecond

// chainMaxWait bounds a chain's wait for IDs while the store is away or its
// Fence withholds them, so the refusals show up (and are counted) instead of
// one long blocked call. It is short because the IDs of a partial batch wait
// for the first refusal to be inserted (see load): those of a chain cut off
// from a wiped store must be in the rows before a newcomer reads its Floor
// there, no sooner than the reset grace less the Fence (1 s) after the
// chain stopped serving.
const chainMaxWait = 100 * time.Millisecond

// offsetClock is the worker's clock: the system clock plus an offset the
// driver sets, standing for a host clock that NTP steps back and forth.
// A new offset waits in next until the snowflake loop applies it between two
// IDs: a step back then always lands right after an ID on the newest tick,
// the case the generator must wait out or refuse (applied at a random moment
// it would mostly land during an INSERT, after the clock passed that tick).
type offsetClock struct {
	off  atomic.Int64
	next atomic.Pointer[int64]
}

// apply makes a pending offset current.
func (c *offsetClock) apply() {
	if p := c.next.Swap(nil); p != nil {
		c.off.Store(*p)
	}
}

func (c *offsetClock) Now() time.Time  { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) UnixNano() int64 { return time.Now().UnixNano() + c.off.Load() }

func (c *offsetClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.System.Sleep(ctx, d)
}

type worker struct {
	cfg   workerConfig
	clk   *offsetClock
	out   *emitter
	log   *slog.Logger
	rows  rowsDB
	store idforge.Store
	seq   atomic.Int64
	src   *source
	// machine is the machine ID last reported; the snowflake loop owns it.
	machine int64
}

func runWorker(ctx context.Context, cfgJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	w := &worker{clk: &offsetClock{}, out: newEmitter(stdout)}
	if err := json.Unmarshal([]byte(cfgJSON), &w.cfg); err != nil {
		fmt.Fprintf(stderr, "torture worker: bad configuration: %v\n", err)
		return exitSetup
	}
	w.clk.off.Store(int64(w.cfg.ClockOffset))
	level := slog.LevelWarn
	if w.cfg.Verbose {
		level = slog.LevelInfo
	}
	w.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("proc", w.cfg.Proc)
	if err := w.run(ctx, stdin); err != nil {
		w.log.Error("torture worker failed", "err", err)
		return exitFailed
	}
	return exitOK
}

func (w *worker) run(ctx context.Context, stdin io.Reader) error {
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	go w.commands(stdin, quit)

	var closeStore func()
	err := w.retry(ctx, "open the store", func() (err error) {
		w.store, closeStore, err = openStore(ctx, w.cfg, w.clk)
		return err
	})
	if err != nil {
		return nil // retry gives up only when told to quit
	}
	defer closeStore()
	db, err := w.cfg.Rows.open()
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(len(generators))
	w.rows = rowsDB{db: db, mysql: w.cfg.Rows.Driver == "mysql"}

	var held []*source
	defer func() {
		for _, s := range held {
			s.close()
		}
	}()
	if w.cfg.Target >= 0 {
		w.src, held, err = w.reclaim(ctx)
	} else {
		inst := machine.Instance{Namespace: w.cfg.Namespace, ID: w.cfg.Instance}
		err = w.retry(ctx, "acquire a machine ID", func() (err error) {
			w.src, err = w.open(ctx, inst)
			return err
		})
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return nil // told to quit before it started
	case err != nil:
		return err
	}
	defer w.src.close()
	w.machine = w.src.machineID()
	w.out.machine(w.machine)

	var wg sync.WaitGroup
	errs := make([]error, len(generators))
	for i, gen := range generators {
		g := w.src.gens[gen]
		wg.Go(func() {
			if errs[i] = w.load(ctx, gen, g); errs[i] != nil {
				quit()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// commands reads the driver's commands; the end of stdin (the driver is
// gone) quits like "quit".
func (w *worker) commands(stdin io.Reader, quit context.CancelFunc) {
	defer quit()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "quit":
			return
		case "clock":
			off, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				w.log.Error("bad clock command", "arg", arg)
				continue
			}
			w.clk.next.Store(&off)
			w.log.Info("clock offset requested", "offset", time.Duration(off))
		default:
			w.log.Error("unknown command", "cmd", cmd)
		}
	}
}

// retry calls f until it succeeds or ctx ends: a store that is cut off, or a
// saved timestamp the clock has not reached yet, only delays a start.
func (w *worker) retry(ctx context.Context, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		w.log.Warn("retrying", "what", what, "err", err)
		if serr := clock.System.Sleep(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("%s: %w (last error: %w)", what, serr, err)
		}
	}
}

// reclaim opens sources under fresh instance IDs until one gets the target
// machine ID, the one a paused worker held; the others stay open so the next
// attempt cannot get their IDs again (a store hands out free and older
// expired IDs first).
func (w *worker) reclaim(ctx context.Context) (*source, []*source, error) {
	var held []*source
	for i := 0; ; i++ {
		inst := machine.Instance{Namespace: w.cfg.Namespace, ID: fmt.Sprintf("intruder-%d-%d", w.cfg.Proc, i)}
		s, err := w.open(ctx, inst)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, held, err
		case err != nil:
			w.log.Warn("intruder: acquiring", "err", err)
		case s.machineID() == w.cfg.Target:
			w.log.Info("intruder: reclaimed", "machine_id", w.cfg.Target, "attempts", i+1)
			return s, held, nil
		default:
			held = append(held, s)
		}
		if i >= 1<<snowflake.Default.MachineBits {
			return nil, held, fmt.Errorf("intruder: machine ID %d not reclaimed after %d attempts", w.cfg.Target, i+1)
		}
		if err := clock.System.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, held, err
		}
	}
}

// load draws batches of IDs from g and inserts them until ctx ends. A batch
// ends when it is full, or early at g's first refusal: the IDs gathered so
// far are inserted before the worker retries, as an application stores what
// it was handed before it stalls. A chain stopped by its Fence, cut off from
// a store that is then wiped, must have its last IDs in the table before a
// newcomer reads its Floor there; held back in a batch until the store came
// back, they could be handed to the newcomer too.
func (w *worker) load(ctx context.Context, gen string, g engine.Generator) error {
	table := tableOf(gen)
	interval := time.Duration(0)
	if w.cfg.Rate > 0 {
		interval = time.Duration(float64(w.cfg.Batch) / float64(w.cfg.Rate) * float64(time.Second))
	}
	first := true
	// prev is when the previous ID was handed out, moved on by the time the
	// worker idled to keep its rate, so that the gap to the next ID is the
	// pause an application issuing at that rate would see.
	var prev time.Time
	for ctx.Err() == nil {
		begun := time.Now()
		start := begun // of the IDs not inserted yet
		ids := make([]int64, 0, w.cfg.Batch)
		flush := func() error {
			if len(ids) == 0 {
				return nil
			}
			err := w.submit(gen, table, start, ids)
			ids, start = ids[:0], time.Now()
			return err
		}
		for len(ids) < w.cfg.Batch {
			id, at, err := w.next(ctx, gen, g, prev, flush)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil // quitting: the batch was never announced, drop it
			case err != nil:
				return err
			}
			if first {
				w.out.start(gen, time.Now())
				first = false
			}
			ids = append(ids, id)
			prev = at
			if gen == genSnowflake {
				w.clk.apply()
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if interval > 0 {
			idle := time.Now()
			clock.System.Sleep(ctx, time.Until(begun.Add(interval)))
			prev = prev.Add(time.Since(idle))
		}
	}
	return nil
}

// submit announces a batch begun at start, inserts it and acknowledges it.
func (w *worker) submit(gen, table string, start time.Time, ids []int64) error {
	seq := w.seq.Add(1)
	w.out.batch(seq, gen, start, ids)
	dups, err := w.insert(table, gen, ids, seq)
	if err != nil {
		return fmt.Errorf("insert batch %d into %s: %w", seq, table, err)
	}
	w.out.commit(seq, dups)
	if gen == genSnowflake {
		if m := w.src.machineID(); m != w.machine {
			w.machine = m
			w.out.machine(m)
		}
	}
	return nil
}

// next returns an ID from g and when it got it, retrying while g refuses.
// It reports a call that took a millisecond or more, met refusals, or ended
// a millisecond or more after prev (the previous ID, zero for none) as
// unavailability. At the first refusal it reports it (R line) and calls
// refused (to insert the partial batch) before it retries; an error from
// refused ends the call.
func (w *worker) next(ctx context.Context, gen string, g engine.Generator, prev time.Time, refused func() error) (int64, time.Time, error) {
	start := time.Now()
	var refusals map[string]int
	for {
		id, err := g.NextID(ctx)
		if err == nil {
			at := time.Now()
			var gap time.Duration
			if !prev.IsZero() {
				gap = at.Sub(prev)
			}
			if d := at.Sub(start); d >= time.Millisecond || refusals != nil || gap >= time.Millisecond {
				w.out.unavailable(gen, start, d, gap, refusals)
			}
			return id, at, nil
		}
		if ctx.Err() != nil {
			return 0, time.Time{}, err
		}
		if refusals == nil {
			refusals = map[string]int{}
			w.log.Warn("generator refuses", "gen", gen, "err", err)
			w.out.refused(gen, time.Now())
			if ferr := refused(); ferr != nil {
				return 0, time.Time{}, ferr
			}
		}
		refusals[reason.Of(err)]++
		if err := clock.System.Sleep(ctx, retryDelay); err != nil {
			return 0, time.Time{}, err
		}
	}
}

// insert inserts one batch and returns how many of its IDs were already in
// the table from another batch, or repeated within it. A duplicate-key error
// is followed by the same insert skipping existing IDs, so every row of the
// batch is in the table when it returns; so is a failure that may or may not
// have committed (a dropped connection), after which a retry must not count
// the batch's own rows as duplicates.
func (w *worker) insert(table, gen string, ids []int64, seq int64) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dupKey, ambiguous := false, false
	for {
		err := w.rows.insert(ctx, table, ids, w.cfg.Proc, seq, dupKey || ambiguous)
		if err == nil {
			break
		}
		switch {
		case isDuplicateKey(err):
			dupKey = true
			w.log.Error("duplicate key", "table", table, "batch", seq, "err", err)
		case ctx.Err() != nil:
			return 0, err
		default:
			ambiguous = true
			w.log.Warn("insert failed, retrying", "table", table, "batch", seq, "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !dupKey && !ambiguous {
		return 0, nil
	}
	others, err := w.rows.conflicts(ctx, table, ids, w.cfg.Proc, seq)
	if err != nil {
		return 0, fmt.Errorf("list duplicates: %w", err)
	}
	for i, c := range others {
		if i < 5 {
			w.out.duplicate(gen, c.id, c.proc, c.batch)
		}
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	return len(others) + len(ids) - len(slices.Compact(sorted)), nil
}
