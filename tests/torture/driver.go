package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/tests/faultproxy"
	"github.com/idforge/idforge/tests/testdb"
)

// faultKinds are the faults the driver injects, one at a time; -faults all
// means those of them the store supports (see allFaults). kill_clock_back
// restarts a killed worker with its clock 1 s behind, as if NTP stepped the
// host clock back while it was down: only the lease's time reservation
// (-ride-through) keeps the restart off its predecessor's milliseconds (see
// README.md). store_reset empties the store mid-run by restarting the run's
// own Redis without persistence; only -store redis has it. partition_wipe
// wipes the store while some workers are cut off from it and starts a
// newcomer on it: only the chains' Fence (-fence) keeps the cut-off workers
// from serving IDs the newcomer, or a worker still connected, is handed
// again. long_outage keeps the store unreachable for -outage, long past the
// machine-ID safe-guard.
var faultKinds = []string{"kill", "kill_clock_back", "clock_back_2ms", "clock_back_50ms", "clock_back_5s", "store_cut", "pause",
	"store_reset", "partition_wipe", "long_outage"}

// faultsFor returns the fault kinds the store supports, in faultKinds order.
func faultsFor(store string) []string {
	var out []string
	for _, k := range faultKinds {
		if k != "store_reset" || store == "redis" {
			out = append(out, k)
		}
	}
	return out
}

// allFaults returns what -faults all means: the kinds the store supports
// but long_outage, which is asked for by name, since one outage of its
// default minute would outlast a short run's whole schedule.
func allFaults(store string) []string {
	return slices.DeleteFunc(faultsFor(store), func(k string) bool { return k == "long_outage" })
}

// clockSteps are the clock faults' steps back.
var clockSteps = map[string]time.Duration{
	"clock_back_2ms":  2 * time.Millisecond,
	"clock_back_50ms": 50 * time.Millisecond,
	"clock_back_5s":   5 * time.Second,
}

// Bounds on the driver's waits. Each is far above what the step takes on an
// idle machine; running out of one is a problem in the report, not a hang.
const (
	readyTimeout   = time.Minute      // every worker issued and inserted its first batches
	recoverTimeout = 30 * time.Second // a worker issues again after a fault ended
	exitTimeout    = 30 * time.Second // a worker quits when told to
	overlap        = time.Second      // a woken worker and its intruder run side by side
)

// resetGrace is how long a store waits after a new epoch before it hands
// anything out: the 2 s default of redisstore and sqlstore, which the workers use.
const resetGrace = 2 * time.Second

// moveTimeout bounds how long a worker woken after a pause may take to leave
// its reclaimed machine ID and issue again. It is short, not a recovery
// timeout, because under -break fence it is how long the woken worker and
// the intruder issue under the same machine ID.
func moveTimeout(safeGuard time.Duration) time.Duration { return safeGuard + 5*time.Second }

// proc is one worker process: a regular worker in a slot, an intruder or a
// newcomer.
type proc struct {
	id    int64
	slot  int // -1 for an intruder or a newcomer
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once it exited and its output was read
	// proxy carries its store connections, so that faults can cut it off
	// alone or with the others.
	proxy *faultproxy.Proxy

	// Guarded by driver.mu.
	machine    int64            // -1 until reported
	lastBatch  map[string]int64 // by generator: the start of its last batch, unix ms
	refusedAt  map[string]int64 // by generator: when its last refusing call began to refuse, unix ms
	commits    map[string]int
	pending    map[int64]pendingBatch
	exited     bool
	expectExit bool // told to quit, or killed
	killed     bool
	tenures    []tenure // its snowflake ticks per machine ID held, in order
	tail       []string // its last log lines
	restartOf  *fault   // set on a worker restarted after a kill
	killedAt   time.Time
}

// tenure is a stretch of snowflake IDs a process issued under one machine
// ID, by tick (milliseconds since the layout's epoch).
type tenure struct {
	proc                *proc
	machine             int64
	firstTick, lastTick int64
}

// noteTicks extends p's tenures with a batch's snowflake runs; a run lies
// in one tick of one machine ID. Callers hold mu.
func (p *proc) noteTicks(runs []idRun) {
	for _, r := range runs {
		_, machine, _, err := snowflake.Default.Decode(r.first)
		if err != nil {
			continue // the read-back reports what cannot be a snowflake ID
		}
		tick := r.first >> (snowflake.Default.MachineBits + snowflake.Default.SequenceBits)
		if k := len(p.tenures) - 1; k >= 0 && p.tenures[k].machine == machine {
			t := &p.tenures[k]
			t.firstTick, t.lastTick = min(t.firstTick, tick), max(t.lastTick, tick)
			continue
		}
		p.tenures = append(p.tenures, tenure{proc: p, machine: machine, firstTick: tick, lastTick: tick})
	}
}

type pendingBatch struct {
	gen  string
	runs []idRun
}

// fault is one injected fault while it lasts.
type fault struct {
	kind    string
	procs   []*proc // nil: every process
	start   time.Time
	stopped time.Time // pause: when the worker was stopped and resumed
	resumed time.Time
	// partition_wipe: the workers cut off, and the chain IDs each process
	// announced since the cut.
	cut   []*proc
	chain map[*proc][]idRun
}

func (f *fault) affects(p *proc) bool { return f.procs == nil || slices.Contains(f.procs, p) }

type genStats struct {
	issued   int64
	acked    []idRun
	inflight []idRun // announced by a process that died before acknowledging them
	dups     int64
}

type driver struct {
	cfg    config
	stderr io.Writer
	exe    string
	be     *backend
	rng    *rand.Rand
	ns     string

	mu       sync.Mutex
	procs    []*proc
	slots    []*proc
	nextProc int64
	gens     map[string]*genStats
	faults   map[string]int
	unavail  map[string]map[string]time.Duration // fault kind → generator → longest
	outside  map[string]time.Duration            // generator → longest outside any fault
	refusals map[string]int64
	// refusalsBy counts refusals by fault kind and class, attributed as
	// unavailability is.
	refusalsBy map[string]map[string]int64
	active     *fault
	samples    []dupSample
	problems   []string
	restarts   int
	reclaims   int
	moves      int
	newcomers  int
	// overlaps counts chain IDs that a worker cut off by partition_wipe
	// announced after the cut and another process announced too.
	overlaps int64

	// refusedBy counts refused NextID calls by fault kind and generator,
	// attributed as unavailability is.
	refusedBy map[string]map[string]int64
	// pauses holds the longest time between two successive IDs of a
	// worker, by fault kind and generator; pausesOutside by generator,
	// outside any fault.
	pauses        map[string]map[string]time.Duration
	pausesOutside map[string]time.Duration
}

func runDriver(ctx context.Context, c config, stdout, stderr io.Writer) int {
	if c.seed == 0 {
		c.seed = rand.Uint64()
	}
	d := newDriver(c)
	d.stderr = stderr
	d.rng = rand.New(rand.NewPCG(c.seed, c.seed^0x9e3779b97f4a7c15))
	d.ns = testdb.UniqueName("torture-")
	d.logf("store=%s workers=%d seed=%d duration=%v faults=%s break=%q",
		c.store, c.workers, c.seed, c.duration, strings.Join(c.faults, ","), c.brk)
	exe, err := os.Executable()
	if err != nil {
		d.logf("cannot find my own binary: %v", err)
		return exitSetup
	}
	d.exe = exe
	if err := checkSignals(); err != nil && len(c.faults) > 0 {
		d.logf("%v", err)
		return exitSetup
	}

	// Setup and cleanup must not be cut short by an interrupt.
	bg := context.WithoutCancel(ctx)
	if d.be, err = newBackend(bg, c.store); err != nil {
		d.logf("setup: %v", err)
		return exitSetup
	}
	defer func() {
		if c.keep {
			d.logf("kept the database %q", d.be.rows.DSN)
			if d.be.redis != nil {
				// Its own Redis is volatile: it ends with the driver.
				d.logf("the run's Redis on %s (prefix %q) stops with the driver; its directory %s is kept",
					d.be.redis.Addr(), d.be.redisPrefix, d.be.redis.Dir())
			}
			return
		}
		cctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		if err := d.be.cleanup(cctx); err != nil {
			d.logf("cleanup: %v", err)
		}
	}()
	if err := d.be.prepare(bg, c.rideThrough); err != nil {
		d.logf("setup: %v", err)
		return exitSetup
	}

	start := time.Now()
	for slot := range c.workers {
		if _, err := d.spawn(slot, -1); err != nil {
			d.logf("setup: %v", err)
			d.stopAll()
			return exitSetup
		}
	}
	if d.awaitAll(ctx, readyTimeout, "every worker issues and inserts its first rows", start) {
		d.schedule(ctx, start.Add(c.duration))
	}
	if ctx.Err() != nil {
		d.problem("interrupted after %v", time.Since(start).Round(time.Second))
	}
	d.stopAll()
	elapsed := time.Since(start)

	// Reading back is about 3 million rows a second on PostgreSQL; the bound
	// only keeps a wedged server from hanging the run.
	vctx, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	rep := d.report(vctx, elapsed)
	if c.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	if !rep.OK {
		d.printTails()
		return exitFailed
	}
	return exitOK
}

// newDriver returns a driver for c with its tallies empty.
func newDriver(c config) *driver {
	d := &driver{
		cfg: c, stderr: io.Discard,
		slots:    make([]*proc, c.workers),
		gens:     map[string]*genStats{},
		faults:   map[string]int{},
		unavail:  map[string]map[string]time.Duration{},
		outside:  map[string]time.Duration{},
		refusals: map[string]int64{}, refusalsBy: map[string]map[string]int64{},
		refusedBy: map[string]map[string]int64{},
		pauses:    map[string]map[string]time.Duration{}, pausesOutside: map[string]time.Duration{},
	}
	for _, g := range generators {
		d.gens[g] = &genStats{}
	}
	return d
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.stderr, "torture %s: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// problemLocked records a failed expectation; callers hold mu.
func (d *driver) problemLocked(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.problems = append(d.problems, msg)
	d.logf("PROBLEM: %s", msg)
}

func (d *driver) problem(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.problemLocked(format, args...)
}

// spawn starts a worker in slot; with slot -1, an intruder that reclaims
// the machine ID target, or with target -1 too a newcomer.
func (d *driver) spawn(slot int, target int64) (*proc, error) { return d.spawnAt(slot, target, 0) }

// spawnAt starts a process whose clock is offset from the system clock,
// with a fault proxy of its own between it and the store.
func (d *driver) spawnAt(slot int, target int64, offset time.Duration) (*proc, error) {
	d.mu.Lock()
	d.nextProc++
	id := d.nextProc
	d.mu.Unlock()
	name := fmt.Sprintf("slot-%d", slot)
	switch {
	case target >= 0:
		name = "intruder"
	case slot < 0:
		name = "newcomer"
	}
	px, err := faultproxy.Start(d.be.storeAddr)
	if err != nil {
		return nil, fmt.Errorf("start %s: fault proxy: %w", name, err)
	}
	wc := workerConfig{
		Proc: id, Instance: name, Target: target,
		Store: d.cfg.store, StoreDSN: d.be.storeDSN(px.Addr()), RedisPrefix: d.be.redisPrefix,
		Rows: d.be.rows, Namespace: d.ns,
		SafeGuard: d.cfg.safeGuard, Heartbeat: d.cfg.heartbeat, RideThrough: d.cfg.rideThrough, Fence: d.cfg.fence, Ahead: d.cfg.ahead,
		MaxBackwards: d.cfg.maxBackwards, Batch: d.cfg.batch, Rate: d.cfg.rate, Break: d.cfg.brk, Verbose: d.cfg.verbose,
		ClockOffset: offset,
	}
	p, err := d.launch(wc, slot, px)
	if err != nil {
		px.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// launch runs the process wc describes, its store connections through px.
func (d *driver) launch(wc workerConfig, slot int, px *faultproxy.Proxy) (*proc, error) {
	js, err := json.Marshal(wc)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.exe, "-worker", string(js))
	setProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{
		id: wc.Proc, slot: slot, name: fmt.Sprintf("%s#%d", wc.Instance, wc.Proc),
		cmd: cmd, stdin: stdin, done: make(chan struct{}), proxy: px,
		machine: -1, lastBatch: map[string]int64{}, refusedAt: map[string]int64{}, commits: map[string]int{}, pending: map[int64]pendingBatch{},
	}
	d.mu.Lock()
	d.procs = append(d.procs, p)
	if slot >= 0 {
		d.slots[slot] = p
	}
	d.mu.Unlock()
	go d.read(p, stdout, stderr)
	return p, nil
}

// read consumes a process's events and logs until it exits.
func (d *driver) read(p *proc, stdout, stderr io.Reader) {
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if d.cfg.verbose {
				fmt.Fprintf(d.stderr, "[%s] %s\n", p.name, sc.Text())
			}
			d.mu.Lock()
			if p.tail = append(p.tail, sc.Text()); len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
			d.mu.Unlock()
		}
	})
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		// A last line without its newline was cut off by a kill: ignore it.
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		ev, perr := parseEvent(strings.TrimSuffix(line, "\n"))
		d.mu.Lock()
		if perr != nil {
			d.problemLocked("%s: %v", p.name, perr)
		} else {
			d.handle(p, ev)
		}
		d.mu.Unlock()
	}
	wg.Wait()
	werr := p.cmd.Wait()
	p.proxy.Close()
	d.mu.Lock()
	p.exited = true
	for _, b := range p.pending {
		gs := d.gens[b.gen]
		gs.inflight = append(gs.inflight, b.runs...)
	}
	p.pending = nil
	switch {
	case !p.expectExit:
		d.problemLocked("%s exited on its own: %v", p.name, werr)
	case werr != nil && !p.killed:
		d.problemLocked("%s failed when told to quit: %v", p.name, werr)
	}
	d.mu.Unlock()
	close(p.done)
}

// handle applies one event; callers hold mu.
func (d *driver) handle(p *proc, ev event) {
	switch ev.kind {
	case evMachine:
		if p.machine >= 0 && ev.id != p.machine {
			d.moves++
			d.logf("%s moved from machine ID %d to %d", p.name, p.machine, ev.id)
		}
		p.machine = ev.id
	case evStart:
		if p.restartOf != nil {
			d.noteUnavail(p.restartOf.kind, ev.gen, ev.at.Sub(p.killedAt))
			d.notePause(p.restartOf.kind, ev.gen, ev.at.Sub(p.killedAt))
		}
	case evBatch:
		p.pending[ev.seq] = pendingBatch{gen: ev.gen, runs: ev.runs}
		p.lastBatch[ev.gen] = ev.at.UnixMilli()
		d.gens[ev.gen].issued += countRuns(ev.runs)
		if ev.gen == genSnowflake {
			p.noteTicks(ev.runs)
		}
		if f := d.active; f != nil && f.chain != nil && ev.gen == genChain {
			f.chain[p] = append(f.chain[p], ev.runs...)
		}
	case evCommit:
		b, ok := p.pending[ev.seq]
		if !ok {
			d.problemLocked("%s acknowledged batch %d it never announced", p.name, ev.seq)
			return
		}
		delete(p.pending, ev.seq)
		gs := d.gens[b.gen]
		gs.acked = append(gs.acked, b.runs...)
		gs.dups += ev.n
		p.commits[b.gen]++
	case evDuplicate:
		if len(d.samples) < 20 {
			d.samples = append(d.samples, d.sample(p, ev))
		}
	case evRefused:
		p.refusedAt[ev.gen] = ev.at.UnixMilli()
	case evUnavail:
		for c, n := range ev.refusals {
			d.refusals[c] += int64(n)
		}
		end := ev.at.Add(ev.dur)
		if f := d.active; f != nil && f.affects(p) && !end.Before(f.start) {
			// A worker stopped inside NextID, or between two IDs, was not
			// unavailable while stopped: that time is the pause fault, not
			// the recovery.
			d.noteUnavail(f.kind, ev.gen, ev.dur-f.stoppedWithin(ev.at, end))
			d.notePause(f.kind, ev.gen, ev.gap-f.stoppedWithin(end.Add(-ev.gap), end))
			by := d.refusalsBy[f.kind]
			if by == nil {
				by = map[string]int64{}
				d.refusalsBy[f.kind] = by
			}
			gens := d.refusedBy[f.kind]
			if gens == nil {
				gens = map[string]int64{}
				d.refusedBy[f.kind] = gens
			}
			for c, n := range ev.refusals {
				by[c] += int64(n)
				gens[ev.gen] += int64(n)
			}
		} else {
			d.outside[ev.gen] = max(d.outside[ev.gen], ev.dur)
			d.pausesOutside[ev.gen] = max(d.pausesOutside[ev.gen], ev.gap)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stoppedWithin returns how much of [from, to] a pause fault held its worker
// stopped; 0 for other faults.
func (f *fault) stoppedWithin(from, to time.Time) time.Duration {
	if f.stopped.IsZero() || f.resumed.IsZero() {
		return 0
	}
	return max(0, minTime(to, f.resumed).Sub(maxTime(from, f.stopped)))
}

// notePause records a pause between two IDs of gen during a fault; callers
// hold mu.
func (d *driver) notePause(kind, gen string, dur time.Duration) {
	m := d.pauses[kind]
	if m == nil {
		m = map[string]time.Duration{}
		d.pauses[kind] = m
	}
	m[gen] = max(m[gen], dur)
}

// noteUnavail records an unavailability of gen during a fault; callers hold mu.
func (d *driver) noteUnavail(kind, gen string, dur time.Duration) {
	m := d.unavail[kind]
	if m == nil {
		m = map[string]time.Duration{}
		d.unavail[kind] = m
	}
	m[gen] = max(m[gen], dur)
}

// await polls cond (called with mu held) until it holds, ctx ends or timeout
// passes; a timeout is recorded as a problem naming what.
func (d *driver) await(ctx context.Context, timeout time.Duration, what string, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		d.mu.Lock()
		ok := cond()
		d.mu.Unlock()
		switch {
		case ok:
			return true
		case time.Now().After(deadline):
			d.problem("%s: not within %v", what, timeout)
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// recovered reports whether p announced a batch of every generator that it
// began gathering at since or later; callers hold mu.
func (p *proc) recovered(since time.Time) bool {
	for _, g := range generators {
		if p.exited || p.lastBatch[g] < since.UnixMilli() {
			return false
		}
	}
	return true
}

// awaitAll waits until every worker in a slot recovered since.
func (d *driver) awaitAll(ctx context.Context, timeout time.Duration, what string, since time.Time) bool {
	return d.await(ctx, timeout, what, func() bool {
		for _, p := range d.slots {
			if !p.recovered(since) {
				return false
			}
		}
		return true
	})
}

func (d *driver) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// schedule injects faults one at a time after the warm-up, separated by
// random gaps: first each kind once in a random order, then random kinds
// until the deadline.
func (d *driver) schedule(ctx context.Context, deadline time.Time) {
	kinds := d.cfg.faults
	if len(kinds) == 0 {
		d.sleep(ctx, time.Until(deadline))
		return
	}
	order := make([]string, len(kinds))
	for i, j := range d.rng.Perm(len(kinds)) {
		order[i] = kinds[j]
	}
	d.sleep(ctx, d.cfg.warmup)
	for i := 0; ctx.Err() == nil; i++ {
		if i > 0 {
			d.sleep(ctx, time.Duration(float64(d.cfg.gap)*(0.5+d.rng.Float64())))
		}
		if ctx.Err() != nil || i >= len(order) && !time.Now().Before(deadline) {
			return
		}
		kind := kinds[d.rng.IntN(len(kinds))]
		if i < len(order) {
			kind = order[i]
		}
		d.inject(ctx, kind)
	}
}

func (d *driver) inject(ctx context.Context, kind string) {
	switch kind {
	case "kill":
		d.kill(ctx, kind, 0)
	case "kill_clock_back":
		d.kill(ctx, kind, -time.Second)
	case "store_cut":
		d.cut(ctx)
	case "long_outage":
		d.outage(ctx)
	case "store_reset":
		d.reset(ctx)
	case "partition_wipe":
		d.partition(ctx)
	case "pause":
		d.pause(ctx)
	default:
		d.stepClock(ctx, kind, clockSteps[kind])
	}
}

// pick returns a random live worker, nil if none is left.
func (d *driver) pick() *proc {
	if ps := d.pickSome(1); ps != nil {
		return ps[0]
	}
	return nil
}

// pickSome returns n random live workers, or all of them if fewer are
// left; nil if none is.
func (d *driver) pickSome(n int) []*proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	var live []*proc
	for _, p := range d.slots {
		if !p.exited {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		d.problemLocked("no live worker left to inject a fault into")
		return nil
	}
	d.rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	return live[:min(n, len(live))]
}

func (d *driver) begin(kind string, procs ...*proc) *fault {
	f := &fault{kind: kind, procs: procs, start: time.Now()}
	names := []string{"every worker (the store)"}
	if procs != nil {
		names = names[:0]
		for _, p := range procs {
			names = append(names, p.name)
		}
	}
	d.mu.Lock()
	d.active = f
	d.faults[kind]++
	d.mu.Unlock()
	d.logf("fault %s on %s", kind, strings.Join(names, ", "))
	return f
}

func (d *driver) end() {
	d.mu.Lock()
	d.active = nil
	d.mu.Unlock()
}

func (d *driver) command(p *proc, format string, args ...any) {
	if _, err := fmt.Fprintf(p.stdin, format+"\n", args...); err != nil {
		d.problem("%s: command %q: %v", p.name, fmt.Sprintf(format, args...), err)
	}
}

// kill kills a worker with SIGKILL and restarts it in its slot, under the
// same instance ID: it must find its machine ID again and wait out the
// timestamp saved for it.
func (d *driver) kill(ctx context.Context, kind string, offset time.Duration) {
	p := d.pick()
	if p == nil {
		return
	}
	f := d.begin(kind, p)
	defer d.end()
	d.mu.Lock()
	p.expectExit, p.killed = true, true
	d.mu.Unlock()
	at := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		d.problem("kill %s: %v", p.name, err)
		return
	}
	<-p.done
	np, err := d.spawnAt(p.slot, -1, offset)
	if err != nil {
		d.problem("restart slot %d: %v", p.slot, err)
		return
	}
	d.mu.Lock()
	np.restartOf, np.killedAt = f, at
	f.procs = append(f.procs, np)
	d.restarts++
	d.mu.Unlock()
	d.await(ctx, recoverTimeout-offset, np.name+" (restarted) issues and inserts", func() bool { return np.recovered(at) })
	if offset != 0 {
		restored := time.Now()
		d.command(np, "clock 0")
		d.await(ctx, recoverTimeout, np.name+" issues again after its clock caught up", func() bool { return np.recovered(restored) })
	}
}

// stepClock steps a worker's clock back by step, as NTP correcting a clock
// that ran fast would, and waits until it issues again: a short step is
// waited out, a long one refused until the clock is back where it was. Once
// it would be, the clock jumps forward to the system time again, so the
// offsets of a long run do not add up.
func (d *driver) stepClock(ctx context.Context, kind string, step time.Duration) {
	p := d.pick()
	if p == nil {
		return
	}
	d.begin(kind, p)
	defer d.end()
	back := time.Now()
	d.command(p, "clock %d", -step.Nanoseconds())
	d.await(ctx, step+recoverTimeout, p.name+" issues again after its clock stepped back", func() bool { return p.recovered(back) })
	d.sleep(ctx, time.Until(back.Add(step)))
	restored := time.Now()
	d.command(p, "clock 0")
	d.await(ctx, recoverTimeout, p.name+" issues again after its clock caught up", func() bool { return p.recovered(restored) })
}

// cut cuts the store off for between half and one and a half safe-guard
// durations, so heartbeats fail and leases may lapse, then restores it.
func (d *driver) cut(ctx context.Context) {
	d.begin("store_cut")
	defer d.end()
	restore := d.cutOff(nil)
	d.sleep(ctx, d.cfg.safeGuard/2+time.Duration(d.rng.Float64()*float64(d.cfg.safeGuard)))
	restore()
	back := time.Now()
	d.awaitAll(ctx, recoverTimeout, "every worker issues again after the store came back", back)
}

// outage keeps the store unreachable from every process for -outage, long
// past the safe-guard, then restores it: every lease and chain must stop
// issuing what the store cannot confirm and go on once it is back. The
// proxies refuse the workers' connections; the server itself, which other
// tests may share, is left alone.
func (d *driver) outage(ctx context.Context) {
	d.begin("long_outage")
	defer d.end()
	restore := d.cutOff(nil)
	d.sleep(ctx, d.cfg.outage)
	restore()
	back := time.Now()
	d.logf("long_outage: the store is reachable again after %v", d.cfg.outage)
	d.awaitAll(ctx, recoverTimeout, "every worker issues again after the long outage", back)
}

// cutOff cuts procs (every live process when nil) off from the store: it
// closes their store connections and refuses new ones until the returned
// function restores them.
func (d *driver) cutOff(procs []*proc) (restore func()) {
	if procs == nil {
		d.mu.Lock()
		for _, p := range d.procs {
			if !p.exited {
				procs = append(procs, p)
			}
		}
		d.mu.Unlock()
	}
	for _, p := range procs {
		p.proxy.Cut()
	}
	return func() {
		for _, p := range procs {
			p.proxy.Restore()
		}
	}
}

// partition cuts one or more workers off from the store (up to half of
// them, at least one), wipes the store meanwhile and starts a newcomer on
// it. The workers still connected see the wipe as a store reset. The
// cut-off ones cannot: their leases stop snowflake IDs when the reservation
// runs out, and their chains' Fence (at most the reservation) stops chain
// IDs, both before the newcomer's reset grace ends, so no process of the
// new epoch, starting above the Floor it reads from the rows, is handed the
// IDs they served. The cut heals once the newcomer issued and inserted and
// every cut-off chain refused. Chain IDs that a cut-off worker announced
// after the cut and another process announced too are counted (overlaps):
// -break partition, without the Fence, shows them, its chains refusing only
// once they used up what they held.
func (d *driver) partition(ctx context.Context) {
	cut := d.pickSome(1 + d.rng.IntN(max(1, d.cfg.workers/2)))
	if cut == nil {
		return
	}
	f := d.begin("partition_wipe") // every worker: the wipe reaches them all
	defer d.end()
	names := make([]string, len(cut))
	for i, p := range cut {
		names[i] = p.name
	}
	d.mu.Lock()
	f.cut, f.chain = cut, map[*proc][]idRun{}
	d.mu.Unlock()
	cutAt := time.Now()
	restore := d.cutOff(cut)
	n, err := d.be.wipe(ctx)
	switch {
	case err != nil:
		restore()
		d.problem("partition_wipe: wiping the store: %v", err)
		return
	case n == 0:
		d.problem("partition_wipe: the store held nothing to wipe")
	}
	wiped := time.Now()
	d.logf("partition_wipe: %s cut off, the store wiped (%d rows or keys)", strings.Join(names, ", "), n)
	nc, err := d.spawn(-1, -1)
	if err != nil {
		restore()
		d.problem("partition_wipe: %v", err)
		return
	}
	if d.await(ctx, recoverTimeout+resetGrace, nc.name+" issues and inserts on the wiped store", func() bool { return nc.recovered(wiped) }) {
		d.mu.Lock()
		d.newcomers++
		d.mu.Unlock()
	}
	d.await(ctx, recoverTimeout, strings.Join(names, ", ")+" cut off stop serving chain IDs", func() bool {
		for _, p := range cut {
			if !p.exited && p.refusedAt[genChain] < cutAt.UnixMilli() {
				return false
			}
		}
		return true
	})
	restore()
	back := time.Now()
	d.logf("partition_wipe: the cut healed %v after the wipe", back.Sub(wiped).Round(time.Millisecond))
	d.awaitAll(ctx, recoverTimeout, "every worker issues again after the partition healed", back)
	d.sleep(ctx, overlap) // the healed workers and the newcomer side by side
	d.retire(nc)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range cut {
		var others []idRun
		for q, runs := range f.chain {
			if q != p {
				others = append(others, runs...)
			}
		}
		mine, _ := union(f.chain[p])
		others, _ = union(others)
		if both := intersection(mine, others); both > 0 {
			d.overlaps += both
			d.logf("partition_wipe: %d chain IDs announced by %s, cut off, and by another process", both, p.name)
		}
	}
}

// reset empties the store: the run's own Redis is stopped with SHUTDOWN
// NOSAVE and started again, as a Redis without persistence restarting
// would. The fault proxy is cut meanwhile, so that the driver sees the
// server come back empty before any worker reaches it; every worker's lease
// and chain must then notice the reset (engine.ErrStoreReset), stop issuing
// what the store forgot, and go on above it once the reset grace is over.
func (d *driver) reset(ctx context.Context) {
	d.begin("store_reset")
	defer d.end()
	restore := d.cutOff(nil)
	before, after, err := resetRedis(ctx, d.be.redis)
	restore()
	switch {
	case err != nil:
		d.problem("store_reset: restarting Redis: %v", err)
		return
	case after != 0:
		d.problem("store_reset: Redis restarted without persistence still holds %d keys", after)
	}
	d.logf("store_reset: Redis held %d keys before the restart, %d after", before, after)
	// Workers go on issuing until a heartbeat sees the reset, then stop for
	// the store's reset grace after the new epoch: wait for batches begun
	// after both, so that the fault's unavailability is counted as its own.
	back := time.Now().Add(resetGrace + d.cfg.heartbeat)
	d.await(ctx, recoverTimeout+time.Until(back), "every worker issues again after the store was reset and its reset grace", func() bool {
		for _, p := range d.slots {
			if !p.recovered(back) {
				return false
			}
		}
		return true
	})
}

// pause stops a worker (SIGSTOP) past the safe-guard, starts an intruder that
// reclaims the stopped worker's expired machine ID and issues on it, then
// resumes the worker (SIGCONT): it must refuse its old ID and move to
// another instead of colliding with the intruder.
func (d *driver) pause(ctx context.Context) {
	p := d.pick()
	if p == nil {
		return
	}
	d.mu.Lock()
	target := p.machine
	d.mu.Unlock()
	f := d.begin("pause", p)
	defer d.end()
	stopped := time.Now()
	if err := stopProc(p.cmd.Process); err != nil {
		d.problem("stop %s: %v", p.name, err)
		return
	}
	d.mu.Lock()
	f.stopped = stopped
	d.mu.Unlock()
	resume := func() time.Time {
		at := time.Now()
		d.mu.Lock()
		f.resumed = at
		d.mu.Unlock()
		if err := contProc(p.cmd.Process); err != nil {
			d.problem("resume %s: %v", p.name, err)
		}
		return at
	}
	// Its stored last timestamp is at most the stop time: past the
	// safe-guard from then, any other instance may reclaim the ID.
	d.sleep(ctx, d.cfg.safeGuard+250*time.Millisecond)
	intruder, err := d.spawn(-1, target)
	if err != nil {
		resume()
		d.problem("start intruder: %v", err)
		return
	}
	defer d.retire(intruder)
	if d.await(ctx, recoverTimeout, fmt.Sprintf("intruder reclaims machine ID %d of %s and inserts under it", target, p.name), func() bool {
		return intruder.machine == target && intruder.commits[genSnowflake] > 0
	}) {
		d.mu.Lock()
		d.reclaims++
		d.mu.Unlock()
	}
	woke := resume()
	d.logf("%s resumed after %v", p.name, woke.Sub(stopped).Round(time.Millisecond))
	d.await(ctx, moveTimeout(d.cfg.safeGuard), fmt.Sprintf("%s wakes, leaves machine ID %d and issues again", p.name, target), func() bool {
		return p.machine != target && p.recovered(woke)
	})
	d.sleep(ctx, overlap)
}

// retire tells a process to quit and waits for it, killing it if it hangs.
func (d *driver) retire(p *proc) {
	d.mu.Lock()
	p.expectExit = true
	d.mu.Unlock()
	d.command(p, "quit")
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		d.problem("%s did not quit within %v; killing it", p.name, exitTimeout)
		d.mu.Lock()
		p.killed = true
		d.mu.Unlock()
		p.cmd.Process.Kill()
		<-p.done
	}
}

// stopAll retires every live process.
func (d *driver) stopAll() {
	d.mu.Lock()
	var live []*proc
	for _, p := range d.procs {
		if !p.exited {
			live = append(live, p)
		}
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range live {
		wg.Go(func() { d.retire(p) })
	}
	wg.Wait()
}

// printTails prints the last log lines of every process, for a failed run.
func (d *driver) printTails() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.procs {
		if len(p.tail) == 0 {
			continue
		}
		fmt.Fprintf(d.stderr, "--- last log lines of %s:\n", p.name)
		for _, l := range p.tail {
			fmt.Fprintf(d.stderr, "    %s\n", l)
		}
	}
}
