package integration

// The multi-process harness of the reset, partition and fixed-machine-ID
// tests: the test binary re-executes itself as a worker (TestWorkerProcess,
// run only when workerEnv holds its configuration), as tests/torture starts
// its workers. A worker builds a registry with idforge.New, draws snowflake and
// chain IDs and reports them on stdout as runs of consecutive IDs; the
// parent gathers every process's runs and counts the IDs issued twice.

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/reason"
)

// workerEnv holds a worker's JSON configuration; the test binary started
// with it runs TestWorkerProcess as the worker and nothing else.
const workerEnv = "IDFORGE_TEST_WORKER"

// Generators a worker draws from.
const (
	genSnowflake = "snowflake"
	genChain     = "chain"
)

// workerConfig is what a worker process is told.
type workerConfig struct {
	Name      string
	Namespace string
	// Redis is the address of the redisstore store; "" for none (then
	// SQLDSN, else MachineID is the fixed machine ID, machine.Manual).
	Redis         string
	Prefix        string
	AllowVolatile bool
	// Init declares a store found without an epoch brand-new: for the
	// processes that start on a new store, never for those that start
	// after a wipe.
	Init bool
	// SQLDriver and SQLDSN open an engine/sqlstore store whose tables the
	// parent created.
	SQLDriver, SQLDSN string
	MachineID         int64
	// DefaultMachine leaves the machine ID to machine.Default() (the
	// environment: IDFORGE_MACHINE_ID, else the lowest free on the host)
	// instead of machine.Manual(MachineID).
	DefaultMachine bool
	// Layout is the snowflake layout (zero: snowflake.Default).
	Layout snowflake.Layout
	// NoReservation gives the lease no reservation (the control:
	// protection off): the store, opened with the window it records, and a
	// fixed machine ID's distributor are handed over as ones reporting a
	// negative window (noReservationStore, noReservation).
	NoReservation bool
	// RideThrough is the store's ride-through window (0: the default).
	RideThrough time.Duration
	// Instance, when not "", is a stable instance ID (a pod name) to hold
	// a store's machine ID under across restarts.
	Instance string
	// SafeGuard and SkewMargin are the lease's (0: the defaults).
	SafeGuard, SkewMargin time.Duration
	// HideResetGrace hands idforge.New the store as a graceHidden, so
	// leased.Acquire cannot see its ResetGrace and accepts NoReservation
	// on a store (the control of the partition test).
	HideResetGrace bool
	// ClockOffset is added to the system clock: the root Settings.Clock.
	ClockOffset time.Duration
	// WaitGo makes the worker start, then wait for "go" on stdin before it
	// calls idforge.New: the parent can "restart" a killed process without
	// paying for a process start in the measured interval.
	WaitGo bool
	// Snowflake and Chain pace each generator: Burst IDs, then a sleep of
	// Every (0: no sleep). A zero Burst leaves the generator out.
	Snowflake, Chain pace
	// ChainStep is the chain's segment size (default 1000, the segment default).
	ChainStep int64
	// CloseWhileIssuing makes "quit" close the registry while the
	// generators are still drawn from, and stop drawing only then: Close
	// races NextID calls in flight.
	CloseWhileIssuing bool
	// StepBackAtQuit steps the clock back by this much on "quit", before
	// the registry is closed: the generator has then used timestamps ahead
	// of the clock Close reads.
	StepBackAtQuit time.Duration
	// Restore, when set, makes the worker the restore test's instead
	// (restore_test.go): rows through GORM and a chain without a Floor.
	Restore *restoreWork
}

type pace struct {
	Burst int
	Every time.Duration
}

// Worker protocol: every line starts with "@@ " (the test binary may print
// other things), then one of
//
//	waiting                          at the "go" gate (WaitGo)
//	ready <machine ID> <ns idforge.New took> <refused New calls>
//	run <gen> <first> <count>        IDs first .. first+count-1 issued
//	machine <id>                     the snowflake generator moved
//	err <gen> <class> <message>      the first refusal of a streak
//	stats <lost> <discarded> <class>=<n>,...   at a clean exit
//
// Commands on stdin: "go", "go <offset ns>" (set ClockOffset, then go),
// "quit" (end of input quits too).
const linePrefix = "@@ "

// TestWorkerProcess is the worker. It does nothing in a normal test run.
func TestWorkerProcess(t *testing.T) {
	js := os.Getenv(workerEnv)
	if js == "" {
		t.Skip("only run as a worker process by the reset and fixed-machine-ID tests")
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "worker: bad configuration: %v\n", err)
		os.Exit(2)
	}
	code := runWorker(cfg)
	os.Exit(code) // no testing output on stdout
}

// offsetClock is the system clock shifted by an offset (nanoseconds).
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time  { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) UnixNano() int64 { return time.Now().UnixNano() + c.off.Load() }
func (c *offsetClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.System.Sleep(ctx, d)
}

// out serializes the worker's report lines; each write is one syscall, so a
// kill -9 loses at most what was not yet written.
type out struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *out) write(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(b)
}

func (o *out) printf(format string, args ...any) {
	o.write([]byte(linePrefix + fmt.Sprintf(format, args...) + "\n"))
}

func runWorker(cfg workerConfig) int {
	if cfg.Restore != nil {
		return runRestoreWorker(cfg)
	}
	ctx, quit := context.WithCancel(context.Background())
	defer quit()
	o := &out{w: os.Stdout}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", cfg.Name)
	clk := &offsetClock{}
	clk.off.Store(int64(cfg.ClockOffset))
	goCh := make(chan struct{})
	go func() {
		defer quit()
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmd, arg, _ := strings.Cut(sc.Text(), " ")
			switch cmd {
			case "go":
				// The parent may decide the clock offset only at the gate.
				if off, err := strconv.ParseInt(arg, 10, 64); err == nil {
					clk.off.Store(off)
				}
				close(goCh)
			case "quit":
				return
			}
		}
	}()
	if !cfg.WaitGo {
		close(goCh)
	}
	set := idforge.Settings{
		Namespace: cfg.Namespace,
		Layout:    cfg.Layout,
		Clock:     clk,
		Logger:    logger,
		Chain:     segment.Settings{Step: cfg.ChainStep, MaxWait: 500 * time.Millisecond},
		Lease:     machine.Settings{SafeGuard: cfg.SafeGuard, SkewMargin: cfg.SkewMargin},
	}
	if cfg.Instance != "" {
		set.Instance = machine.Instance{ID: cfg.Instance, Stable: true}
	}
	window := cfg.RideThrough
	switch {
	case cfg.Redis != "":
		c := redis.NewClient(&redis.Options{Addr: cfg.Redis, MaxRetries: -1, PoolSize: 4,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		defer c.Close()
		var st *redisstore.Store
		for {
			var err error
			st, err = redisstore.Open(ctx, c, redisstore.Settings{Prefix: cfg.Prefix, Clock: clk,
				AllowVolatile: cfg.AllowVolatile, Init: cfg.Init, Logger: logger, RideThrough: window})
			if err == nil {
				break
			}
			logger.Warn("opening the store, retrying", "err", err)
			if clock.System.Sleep(ctx, 100*time.Millisecond) != nil {
				return 1
			}
		}
		set.Store = st
	case cfg.SQLDSN != "":
		db, err := sql.Open(cfg.SQLDriver, cfg.SQLDSN)
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker: %v\n", err)
			return 2
		}
		defer db.Close()
		var st *sqlstore.Store
		for {
			if st, err = sqlstore.Open(ctx, db, sqlstore.Settings{Clock: clk, Init: cfg.Init, RideThrough: window}); err == nil {
				break
			}
			logger.Warn("opening the store, retrying", "err", err)
			if clock.System.Sleep(ctx, 100*time.Millisecond) != nil {
				return 1
			}
		}
		defer st.Close()
		set.Store = st
	case cfg.DefaultMachine:
	default:
		set.Machine = machine.Manual(cfg.MachineID)
		if cfg.NoReservation {
			set.Machine = noReservation{set.Machine}
		}
	}
	switch {
	case cfg.NoReservation && set.Store != nil:
		set.Store = noReservationStore{graceHidden{set.Store}}
	case cfg.HideResetGrace && set.Store != nil:
		set.Store = graceHidden{set.Store}
	}

	if cfg.WaitGo {
		o.printf("waiting")
	}
	select {
	case <-goCh:
	case <-ctx.Done():
		return 0
	}
	// A restart that finds its machine ID reserved further ahead than it
	// may wait is refused (ErrClockBackwards): retry, as a restarted pod
	// would be.
	start, refused := time.Now(), 0
	var reg *idforge.Registry
	for {
		var err error
		if reg, err = idforge.New(ctx, set); err == nil {
			break
		}
		if ctx.Err() != nil {
			return 0
		}
		refused++
		o.printf("err new %s %s", refusalClass(err), oneLine(err))
		if clock.System.Sleep(ctx, 20*time.Millisecond) != nil {
			return 0
		}
	}
	took := time.Since(start)
	defer reg.Close()
	o.printf("ready %d %d %d", reg.Stats().MachineID, took.Nanoseconds(), refused)

	var (
		wg      sync.WaitGroup
		errsMu  sync.Mutex
		errs    = map[string]int{}
		machID  atomic.Int64
		sawSeen = map[string]bool{}
	)
	machID.Store(reg.Stats().MachineID)
	seqBits := snowflake.Default.SequenceBits
	if cfg.Layout != (snowflake.Layout{}) {
		seqBits = cfg.Layout.SequenceBits
	}
	// The generators are drawn from until "quit", or with CloseWhileIssuing
	// until the registry was closed after it.
	issuing, stopIssuing := ctx, context.CancelFunc(func() {})
	if cfg.CloseWhileIssuing {
		issuing, stopIssuing = context.WithCancel(context.Background())
	}
	defer stopIssuing()
	loop := func(gen string, g engine.Generator, p pace) {
		ctx := issuing // not the worker's: see CloseWhileIssuing
		defer wg.Done()
		var (
			buf      []byte
			first, n int64
			failing  bool
		)
		flush := func() {
			if n > 0 {
				buf = fmt.Appendf(buf, "%srun %s %d %d\n", linePrefix, gen, first, n)
				n = 0
			}
			if len(buf) > 0 {
				o.write(buf)
				buf = buf[:0]
			}
		}
		defer flush()
		for ctx.Err() == nil {
			for range p.Burst {
				id, err := g.NextID(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					class := refusalClass(err)
					errsMu.Lock()
					errs[gen+"/"+class]++
					report := !failing || !sawSeen[gen+"/"+class]
					sawSeen[gen+"/"+class] = true
					errsMu.Unlock()
					if report {
						flush()
						o.printf("err %s %s %s", gen, class, oneLine(err))
					}
					failing = true
					_ = clock.System.Sleep(ctx, 5*time.Millisecond)
					continue
				}
				failing = false
				// A run is consecutive IDs of one tick and machine ID.
				if n > 0 && id == first+n && (gen != genSnowflake || id>>seqBits == first>>seqBits) {
					n++
				} else {
					if n > 0 {
						buf = fmt.Appendf(buf, "%srun %s %d %d\n", linePrefix, gen, first, n)
					}
					first, n = id, 1
				}
			}
			flush()
			if gen == genSnowflake {
				if m := reg.Stats().MachineID; m != machID.Load() && m >= 0 {
					machID.Store(m)
					o.printf("machine %d", m)
				}
			}
			if p.Every > 0 {
				_ = clock.System.Sleep(ctx, p.Every)
			}
		}
	}
	if cfg.Snowflake.Burst > 0 {
		sf, err := reg.Generator(ctx, "snowflake", "")
		if err != nil {
			o.printf("err setup other %s", oneLine(err))
			return 1
		}
		wg.Add(1)
		go loop(genSnowflake, sf, cfg.Snowflake)
	}
	if cfg.Chain.Burst > 0 {
		g, err := reg.Generator(ctx, "chain", "reset")
		if err != nil {
			o.printf("err setup other %s", oneLine(err))
			return 1
		}
		wg.Add(1)
		go loop(genChain, g, cfg.Chain)
	}
	<-ctx.Done()
	clk.off.Add(-int64(cfg.StepBackAtQuit))
	if cfg.CloseWhileIssuing {
		reg.Close()
		stopIssuing()
	}
	wg.Wait()
	st := reg.Stats()
	var discarded int64
	for _, g := range st.Generators {
		if g.Kind == "chain" && g.Name == "reset" {
			discarded = g.Discarded
		}
	}
	lost := st.LeaseLost
	errsMu.Lock()
	var classes []string
	for k, v := range errs {
		classes = append(classes, k+"="+strconv.Itoa(v))
	}
	errsMu.Unlock()
	slices.Sort(classes)
	o.printf("stats %d %d %s", lost, discarded, strings.Join(classes, ","))
	return 0
}

// graceHidden hides the reset grace of the store it embeds.
type graceHidden struct{ idforge.Store }

// Terms are the store's without its reset grace.
func (g graceHidden) Terms() machine.Terms {
	t := g.Store.Terms()
	t.ResetGrace = 0
	return t
}

// noReservation is a distributor whose ride-through window is none: the
// lease on it reserves no time ahead (the control of the fixed-ID tests).
type noReservation struct{ machine.Distributor }

// Terms are the distributor's with no window.
func (n noReservation) Terms() machine.Terms {
	t := n.Distributor.Terms()
	t.RideThrough = -1
	return t
}

// refusalClass names the sentinel error behind a refusal (reason.Of).
// A chain refusal that names neither a reset nor a store failure ("the
// store has not failed, it is slow to answer") is "unexplained".
func refusalClass(err error) string {
	// An exhausted chain whose store has not failed says so in its message.
	if errors.Is(err, engine.ErrSegmentExhausted) && strings.Contains(err.Error(), "the store has not failed") && !errors.Is(err, engine.ErrStoreReset) {
		return "unexplained"
	}
	return reason.Of(err)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }

// idRun is IDs first .. first+count-1, issued by one process.
type idRun struct {
	first, count int64
	proc         string
}

// workerProc is a worker process as the parent sees it.
type workerProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when it exited and its output was read

	layout snowflake.Layout // of its snowflake IDs

	mu       sync.Mutex
	waiting  bool
	ready    bool
	machine  int64
	took     time.Duration // how long its idforge.New took
	refused  int           // New calls refused before that
	machines []int64       // every machine ID it issued under
	runs     map[string][]idRun
	issued   map[string]int64
	lastSeen map[string]time.Time // when the parent last received IDs of a generator
	// refusing holds the generators whose latest report is a refusal (an
	// "err" line with no run after it): they stopped issuing, as far as the
	// parent has read.
	refusing map[string]bool
	errs     []string // "gen class message"
	stats    string
	exitErr  error
	stderr   strings.Builder
}

// noExitSleep is the environment variable that spares a worker the second
// the race runtime sleeps before a process exits (atexit_sleep_ms).
func noExitSleep() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// startWorker re-executes the test binary as a worker with cfg.
func startWorker(t *testing.T, cfg workerConfig, extraEnv ...string) *workerProc {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(append(os.Environ(), workerEnv+"="+string(js)), extraEnv...)
	// Die with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &workerProc{name: cfg.Name, layout: cmp.Or(cfg.Layout, snowflake.Default), cmd: cmd, done: make(chan struct{}), machine: -1,
		runs: map[string][]idRun{}, issued: map[string]int64{}, lastSeen: map[string]time.Time{}, refusing: map[string]bool{}}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting worker %s: %v", cfg.Name, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			if p.stderr.Len() < 64<<10 {
				p.stderr.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
		}
	})
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break // a last line without its newline was cut off by a kill
			}
			p.handle(strings.TrimSuffix(line, "\n"))
		}
		wg.Wait()
		werr := cmd.Wait()
		p.mu.Lock()
		p.exitErr = werr
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("stderr of worker %s:\n%s", p.name, p.stderr.String())
			p.mu.Unlock()
		}
	})
	return p
}

func (p *workerProc) handle(line string) {
	rest, ok := strings.CutPrefix(line, linePrefix)
	if !ok {
		return
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch f[0] {
	case "waiting":
		p.waiting = true
	case "ready":
		if len(f) == 4 {
			p.machine, _ = strconv.ParseInt(f[1], 10, 64)
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			p.took = time.Duration(ns)
			p.refused, _ = strconv.Atoi(f[3])
			p.machines = append(p.machines, p.machine)
			p.ready = true
		}
	case "machine":
		if len(f) == 2 {
			m, _ := strconv.ParseInt(f[1], 10, 64)
			p.machine = m
			p.machines = append(p.machines, m)
		}
	case "run":
		if len(f) == 4 {
			first, err1 := strconv.ParseInt(f[2], 10, 64)
			n, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 == nil && err2 == nil && n > 0 {
				p.runs[f[1]] = append(p.runs[f[1]], idRun{first: first, count: n, proc: p.name})
				p.issued[f[1]] += n
				p.lastSeen[f[1]] = time.Now()
				p.refusing[f[1]] = false
			}
		}
	case "err":
		p.errs = append(p.errs, strings.TrimPrefix(rest, "err "))
		if len(f) > 1 {
			p.refusing[f[1]] = true
		}
	case "stats":
		p.stats = strings.TrimPrefix(rest, "stats ")
	}
}

func (p *workerProc) command(cmd string) { _, _ = io.WriteString(p.stdin, cmd+"\n") }

// kill sends SIGKILL and waits until its output is read.
func (p *workerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// quit tells the worker to stop and waits for it (killing it after a minute).
func (p *workerProc) quit(t *testing.T) {
	t.Helper()
	p.command("quit")
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Errorf("worker %s did not quit within a minute; killing it", p.name)
		p.kill()
	}
	if err := p.exitError(); err != nil {
		t.Errorf("worker %s: %v", p.name, err)
	}
}

func (p *workerProc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// waitGate waits until a WaitGo worker is at its "go" gate.
func (p *workerProc) waitGate(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		ok := p.waiting
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("worker %s exited before its go gate: %v\nstderr:\n%s", p.name, p.exitError(), p.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s is not at its go gate after a minute", p.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitIssuing waits until the worker issued IDs of every generator named
// since the given time (as the parent received them).
func (p *workerProc) waitIssuing(t *testing.T, since time.Time, gens ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		ok := p.ready
		for _, g := range gens {
			ok = ok && p.lastSeen[g].After(since)
		}
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("worker %s exited before it issued %v: %v\nstderr:\n%s", p.name, gens, p.exitError(), p.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s has not issued %v since %v after a minute", p.name, gens, since.Format("15:04:05.000"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// seenSince reports whether the parent received IDs of gen from the worker
// after t.
func (p *workerProc) seenSince(gen string, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeen[gen].After(t)
}

// stopped reports whether the latest report of gen is a refusal.
func (p *workerProc) stopped(gen string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusing[gen]
}

// exited reports whether the worker has exited (and its output was read).
func (p *workerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *workerProc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// dupReport is what the parent finds in the IDs of several processes.
type dupReport struct {
	issued     int64
	duplicates int64    // IDs issued more than once (each extra issue counts)
	samples    []string // a few overlapping runs
	// tickOverlaps counts (machine ID, tick) pairs under which two or more
	// processes issued snowflake IDs: a duplicate waiting to happen, whether
	// or not their sequence numbers met.
	tickOverlaps int
	tickSamples  []string
}

// duplicates counts the IDs of gen issued more than once across procs.
func duplicates(gen string, procs ...*workerProc) dupReport {
	var runs []idRun
	for _, p := range procs {
		p.mu.Lock()
		runs = append(runs, p.runs[gen]...)
		p.mu.Unlock()
	}
	slices.SortFunc(runs, func(a, b idRun) int {
		if a.first != b.first {
			return cmp.Compare(a.first, b.first)
		}
		return cmp.Compare(a.count, b.count)
	})
	var rep dupReport
	var covered int64 // IDs of the union
	end := int64(-1 << 63)
	var endBy idRun
	for _, r := range runs {
		rep.issued += r.count
		last := r.first + r.count - 1
		switch {
		case r.first > end:
			covered += r.count
			end, endBy = last, r
		case last > end:
			covered += last - end
			if len(rep.samples) < 5 {
				rep.samples = append(rep.samples, fmt.Sprintf("%s [%d+%d] overlaps %s [%d+%d]", r.proc, r.first, r.count, endBy.proc, endBy.first, endBy.count))
			}
			end, endBy = last, r
		default:
			if len(rep.samples) < 5 {
				rep.samples = append(rep.samples, fmt.Sprintf("%s [%d+%d] inside %s [%d+%d]", r.proc, r.first, r.count, endBy.proc, endBy.first, endBy.count))
			}
		}
	}
	rep.duplicates = rep.issued - covered
	if gen == genSnowflake {
		layout := snowflake.Default
		if len(procs) > 0 {
			layout = procs[0].layout
		}
		byTick := map[[2]int64]string{}
		for _, r := range runs {
			at, machine, _, err := layout.Decode(r.first)
			if err != nil {
				continue
			}
			tick := r.first >> (layout.MachineBits + layout.SequenceBits)
			k := [2]int64{machine, tick}
			switch prev, ok := byTick[k]; {
			case !ok:
				byTick[k] = r.proc
			case prev != r.proc && !strings.Contains(prev, "+"):
				rep.tickOverlaps++
				if len(rep.tickSamples) < 5 {
					rep.tickSamples = append(rep.tickSamples, fmt.Sprintf("machine %d tick %d (%s): %s and %s",
						machine, tick, at.Format("15:04:05.000"), prev, r.proc))
				}
				byTick[k] = prev + "+" + r.proc
			}
		}
	}
	return rep
}

// tickMeter counts, while two workers run, the (machine ID, tick) pairs
// under which both issued snowflake IDs: duplicates' tickOverlaps for two
// processes, read incrementally from what they reported so far.
type tickMeter struct {
	procs  [2]*workerProc
	read   [2]int           // runs already counted, per process
	seen   map[int64]uint8  // (tick, machine ID) → which processes issued under it
	shared int              // pairs both issued under
	layout snowflake.Layout // of both
}

func newTickMeter(a, b *workerProc) *tickMeter {
	return &tickMeter{procs: [2]*workerProc{a, b}, seen: map[int64]uint8{}, layout: a.layout}
}

// count reads the runs reported since the last call and returns how many
// (machine ID, tick) pairs both processes issued under so far.
func (m *tickMeter) count() int {
	for i, p := range m.procs {
		bit := uint8(1) << i
		p.mu.Lock()
		runs := p.runs[genSnowflake][m.read[i]:]
		m.read[i] += len(runs)
		for _, r := range runs { // a run is one tick of one machine ID
			k := r.first >> m.layout.SequenceBits
			if had := m.seen[k]; had&bit == 0 {
				m.seen[k] = had | bit
				if had != 0 {
					m.shared++
				}
			}
		}
		p.mu.Unlock()
	}
	return m.shared
}

func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
