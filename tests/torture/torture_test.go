package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// The short runs: every fault kind at least once per store, about 20 s each,
// 4 workers (the CI machine has 2 cores) at a bounded rate.
var shortRun = []string{"-duration", "20s", "-workers", "4", "-rate", "5000", "-gap", "300ms", "-warmup", "500ms"}

var (
	binDir   string
	buildErr error
	build    sync.Once
)

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		if binDir, err = os.MkdirTemp("", "torture-test-"); err != nil {
			panic(err)
		}
		defer os.RemoveAll(binDir)
		return m.Run()
	}()
	os.Exit(code)
}

// binary builds the program once, without -race: the workers are what is
// under test, and the race detector would multiply the CPU they need.
func binary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the torture driver pauses and kills workers with Linux signals")
	}
	if testing.Short() {
		t.Skip("torture runs take seconds each; skipped with -short")
	}
	bin := filepath.Join(binDir, "torture")
	build.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return bin
}

// requireServers skips the test when a server the store needs is down, or
// fails it with IDFORGE_REQUIRE_SERVERS=1.
func requireServers(t *testing.T, store string) {
	t.Helper()
	switch store {
	case "postgres":
		testdb.Postgres(t)
	case "mariadb":
		testdb.MariaDB(t)
	case "redis":
		// The driver starts a redis-server of its own (store_reset restarts
		// it empty); the rows go to PostgreSQL.
		if _, err := exec.LookPath("redis-server"); err != nil {
			if testdb.Required() {
				t.Fatalf("redis-server is required (IDFORGE_REQUIRE_SERVERS=1): %v", err)
			}
			t.Skipf("no redis-server for the driver to start: %v", err)
		}
		testdb.Postgres(t)
	}
}

// torture runs the program with -json and returns its report and exit status.
func torture(t *testing.T, args ...string) (*report, int) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"-json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run torture: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("torture %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
		}
	})
	if code == exitSetup {
		t.Fatalf("torture could not set up (exit %d):\n%s", code, stderr.String())
	}

	// Exactly one JSON object, with the keys the issue asks for.
	dec := json.NewDecoder(&stdout)
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("report is not a JSON object: %v\nstdout: %s", err, stdout.String())
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value on stdout (next: %v)", err)
	}
	for _, k := range []string{"ids_issued", "duplicates", "rows_acked", "rows_found", "rows_lost", "faults",
		"max_unavailable_ms", "ids_per_second", "seed", "store", "duration", "rows_in_flight_found", "tick_overlaps",
		"refusals_by_fault", "partition_overlaps", "ids_refused_by_fault", "max_pause_ms_by_fault", "max_pause_outside_faults_ms"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks the key %q", k)
		}
	}
	var rep report
	js, _ := json.Marshal(raw)
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("decode report: %v", err)
	}
	return &rep, code
}

func seedArgs(t *testing.T) []string {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return []string{"-seed", strconv.FormatUint(seed, 10)}
}

// TestTorture is the short run of every fault on every store: it must issue
// no ID twice, lose no acknowledged row, inject every fault kind the store
// supports (Redis also store_reset: its own Redis emptied and restarted
// mid-run), and show the library reacting as designed (long clock steps
// refused, reclaimed machine IDs left, killed workers restarted, chains cut
// off from a wiped store stopped by their Fence).
func TestTorture(t *testing.T) {
	for _, store := range []string{"postgres", "mariadb", "redis"} {
		t.Run(store, func(t *testing.T) {
			requireServers(t, store)
			rep, code := torture(t, slices.Concat([]string{"-store", store}, shortRun, seedArgs(t))...)
			t.Logf("%s: %d snowflake + %d chain IDs, %d rows acked, %d found (%d in flight at a kill), faults %v, longest unavailable %v ms",
				store, rep.IDsIssued[genSnowflake], rep.IDsIssued[genChain], rep.RowsAcked, rep.RowsFound,
				rep.RowsInFlightFound, rep.Faults, rep.MaxUnavailableMS)
			if code != exitOK || !rep.OK {
				t.Errorf("exit status %d, ok %v, problems %q", code, rep.OK, rep.Problems)
			}
			if rep.Duplicates != 0 || rep.AckedTwice != 0 {
				t.Errorf("duplicates: %d from the database, %d acknowledged twice; samples %v", rep.Duplicates, rep.AckedTwice, rep.DuplicateSamples)
			}
			if rep.TickOverlaps != 0 {
				t.Errorf("%d tick overlaps: %q", rep.TickOverlaps, rep.TickOverlapSamples)
			}
			if rep.RowsLost != 0 || rep.RowsUnexplained != 0 {
				t.Errorf("rows lost %d, unexplained %d", rep.RowsLost, rep.RowsUnexplained)
			}
			if rep.RowsFound != rep.RowsAcked+rep.RowsInFlightFound {
				t.Errorf("rows found %d != acked %d + in flight found %d", rep.RowsFound, rep.RowsAcked, rep.RowsInFlightFound)
			}
			for _, k := range allFaults(store) {
				if rep.Faults[k] < 1 {
					t.Errorf("fault %s injected %d times", k, rep.Faults[k])
				}
			}
			for _, g := range generators {
				if rep.IDsIssued[g] == 0 || rep.Tables[g].Acked == 0 {
					t.Errorf("%s: issued %d, acked %d", g, rep.IDsIssued[g], rep.Tables[g].Acked)
				}
			}
			if rep.Refusals["clock_backwards"] == 0 {
				t.Errorf("the 50 ms and 5 s clock steps were never refused: refusals %v", rep.Refusals)
			}
			if rep.Reclaims != rep.Faults["pause"] || rep.Moves < rep.Faults["pause"] {
				t.Errorf("%d pauses, %d machine IDs reclaimed by intruders, %d moves", rep.Faults["pause"], rep.Reclaims, rep.Moves)
			}
			if kills := rep.Faults["kill"] + rep.Faults["kill_clock_back"]; rep.Restarts != kills {
				t.Errorf("%d kills, %d restarts", kills, rep.Restarts)
			}
			// The driver heals a partition only once every cut-off chain
			// refused, and the cut outlasts the Fence by the reset grace
			// the newcomer waits: its refusals must be there.
			wipes := rep.RefusalsByFault["partition_wipe"]
			t.Logf("partition_wipe: %d newcomers, refusals %v, longest unavailable %d ms, %d chain IDs served by a cut-off worker and another",
				rep.Newcomers, wipes, rep.MaxUnavailableMS["partition_wipe"], rep.PartitionOverlaps)
			if rep.Newcomers != rep.Faults["partition_wipe"] || rep.PartitionOverlaps != 0 {
				t.Errorf("%d partition_wipe faults, %d newcomers, %d chain IDs served by a cut-off worker and another process",
					rep.Faults["partition_wipe"], rep.Newcomers, rep.PartitionOverlaps)
			}
			if wipes["store_unavailable"] == 0 || wipes["no_floor"] != 0 {
				t.Errorf("partition_wipe refusals %v: want store_unavailable (the Fence) and no no_floor (every worker has a Floor)", wipes)
			}
		})
	}
}

// TestLongOutage keeps the store away for a few seconds. With the stores'
// ride-through window longer than the outage, snowflake IDs go on through
// it: none is refused; with the chains keeping more than the outage's worth
// of their traffic fetched ahead (-ahead), chain IDs go on too. The control
// run keeps the default 1 s window and the chains' default prefetch (under
// a second of this traffic), so the lease refuses once its reservation runs
// out and snowflake IDs pause for at least the outage less the window, and
// the chains run dry and refuse. Either way no ID may repeat and no row may
// be lost. Only lower bounds on time are asserted: a slow host lengthens
// pauses, it cannot shorten them.
func TestLongOutage(t *testing.T) {
	const store = "postgres"
	requireServers(t, store)
	const outage = 4 * time.Second
	for _, tc := range []struct {
		name   string
		window time.Duration
		ahead  time.Duration
		args   []string
	}{
		// The window must stay below SafeGuard less its fifth (the skew
		// margin): the lease refuses a longer one. The chains measure
		// their rate with a 10 s weighted mean, a third of it after the
		// 4 s warm-up: 30 s ahead then holds about 10 s of traffic, well
		// past the outage and the reconnection.
		{"window", 10 * time.Second, 30 * time.Second, []string{"-safeguard", "20s", "-warmup", "4s"}},
		{"control", time.Second, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, code := torture(t, slices.Concat([]string{"-store", store, "-faults", "long_outage", "-outage", outage.String(),
				"-ride-through", tc.window.String(), "-ahead", tc.ahead.String(),
				"-duration", "1s", "-workers", "2", "-rate", "5000"}, tc.args, seedArgs(t))...)
			refused, pause := rep.IDsRefusedByFault["long_outage"], rep.MaxPauseByFault["long_outage"]
			t.Logf("long_outage, ride-through %v, chains %v ahead: IDs refused %v, longest pause %v ms, refusals %v",
				tc.window, tc.ahead, refused, pause, rep.RefusalsByFault["long_outage"])
			if code != exitOK || !rep.OK {
				t.Errorf("exit status %d, ok %v, problems %q", code, rep.OK, rep.Problems)
			}
			if rep.Faults["long_outage"] != 1 || rep.Duplicates != 0 || rep.AckedTwice != 0 || rep.TickOverlaps != 0 || rep.RowsLost != 0 {
				t.Errorf("faults %v, duplicates %d, acked twice %d, tick overlaps %d, rows lost %d",
					rep.Faults, rep.Duplicates, rep.AckedTwice, rep.TickOverlaps, rep.RowsLost)
			}
			if _, ok := refused[genChain]; !ok {
				t.Errorf("ids_refused_by_fault lacks the chain: %v", refused)
			}
			if tc.ahead > outage {
				if refused[genChain] != 0 {
					t.Errorf("%d chain IDs refused during a %v outage with the chains %v ahead, want none",
						refused[genChain], outage, tc.ahead)
				}
			} else if refused[genChain] == 0 {
				t.Errorf("no chain ID refused during a %v outage without -ahead: %v", outage, refused)
			}
			if tc.window > outage {
				if refused[genSnowflake] != 0 {
					t.Errorf("%d snowflake IDs refused during a %v outage with a %v ride-through window, want none",
						refused[genSnowflake], outage, tc.window)
				}
				return
			}
			if refused[genSnowflake] == 0 || rep.RefusalsByFault["long_outage"]["machine_id_lost"] == 0 {
				t.Errorf("no snowflake ID refused during a %v outage with a %v window: %v", outage, tc.window, refused)
			}
			if min := (outage - tc.window).Milliseconds(); pause[genSnowflake] < min {
				t.Errorf("longest snowflake pause %d ms, want at least the outage less the window, %d ms", pause[genSnowflake], min)
			}
		})
	}
}

// TestBrokenBuildsAreCaught runs the short torture with each -break switch,
// a deliberately broken worker, and expects the report to show duplicates
// and the exit status to say so: the suite catches what it claims to catch.
func TestBrokenBuildsAreCaught(t *testing.T) {
	// Each break runs at full speed, with only the fault it needs: the
	// duplicates come from two generators (or one, twice) issuing in the same
	// milliseconds, which the bounded rate of the short run makes rare.
	for _, tc := range []struct {
		brk  string
		args []string
	}{
		// Every worker on machine ID 1: they collide as soon as they issue.
		{"machine", []string{"-workers", "2", "-faults", "none", "-duration", "3s"}},
		// The woken worker keeps issuing on the ID the intruder reclaimed.
		{"fence", []string{"-workers", "1", "-faults", "pause", "-duration", "1s", "-warmup", "500ms",
			"-safeguard", "2s", "-heartbeat", "200ms"}},
		// The generator forgets its last timestamp on a 5 s step back and
		// reissues the last 5 s of its own ticks: warm up longer than that.
		{"clock", []string{"-workers", "1", "-faults", "clock_back_5s", "-duration", "1s", "-warmup", "6s"}},
	} {
		t.Run(tc.brk, func(t *testing.T) {
			requireServers(t, "postgres")
			rep, code := torture(t, slices.Concat([]string{"-store", "postgres", "-break", tc.brk}, tc.args, seedArgs(t))...)
			t.Logf("-break %s: %d duplicates (%d acknowledged twice) among %d snowflake IDs, e.g. %v",
				tc.brk, rep.Duplicates, rep.AckedTwice, rep.IDsIssued[genSnowflake], rep.DuplicateSamples[:min(2, len(rep.DuplicateSamples))])
			if rep.Duplicates == 0 || rep.AckedTwice == 0 {
				t.Errorf("-break %s went unnoticed: duplicates %d, acknowledged twice %d", tc.brk, rep.Duplicates, rep.AckedTwice)
			}
			// Two processes on one machine ID show as overlapping ticks
			// whether or not their sequence numbers met; -break clock
			// collides with itself.
			if wantOverlap := tc.brk != "clock"; (rep.TickOverlaps > 0) != wantOverlap {
				t.Errorf("-break %s: %d tick overlaps, want them: %v", tc.brk, rep.TickOverlaps, wantOverlap)
			}
			if code != exitFailed || rep.OK {
				t.Errorf("-break %s: exit status %d, ok %v; want %d and false", tc.brk, code, rep.OK, exitFailed)
			}
			if rep.Tables[genChain].Duplicates != 0 || rep.RowsLost != 0 {
				t.Errorf("-break %s breaks only snowflake IDs, yet chain duplicates %d, rows lost %d",
					tc.brk, rep.Tables[genChain].Duplicates, rep.RowsLost)
			}
			for _, s := range rep.DuplicateSamples {
				if s.Generator != genSnowflake || s.MachineID == nil {
					t.Errorf("duplicate sample %v: want a snowflake ID with its machine ID", s)
					continue
				}
				switch tc.brk {
				case "machine":
					if *s.MachineID != brokenMachineID {
						t.Errorf("duplicate on machine ID %d, want the shared %d", *s.MachineID, brokenMachineID)
					}
				case "fence":
					if !strings.HasPrefix(s.By, "intruder") && !strings.HasPrefix(s.Already, "intruder") {
						t.Errorf("duplicate %v is not between the woken worker and the intruder", s)
					}
				}
			}
		})
	}
	for _, store := range []string{"postgres", "mariadb", "redis"} {
		t.Run("partition/"+store, func(t *testing.T) { partitionControl(t, store) })
	}
}

// partitionRun is the -break partition control's run: one worker, which so
// holds the newest chain range when it is cut off, at a rate low enough
// that what it holds lasts past the newcomer's reset grace.
var partitionRun = []string{"-workers", "1", "-faults", "partition_wipe", "-duration", "1s", "-warmup", "1s", "-rate", "500"}

// partitionAttempts bounds the control's runs: whether the cut-off worker
// still serves when the newcomer starts depends on how much it held.
const partitionAttempts = 3

// partitionControl runs partition_wipe with chains without their Fence on
// store (each store is wiped its own way) until the driver counts chain IDs
// that the cut-off worker served after the cut and the newcomer was handed
// too, then checks that the database saw them as duplicates.
func partitionControl(t *testing.T, store string) {
	requireServers(t, store)
	var rep *report
	var code int
	for attempt := 1; ; attempt++ {
		rep, code = torture(t, slices.Concat([]string{"-store", store, "-break", "partition"}, partitionRun, seedArgs(t))...)
		if rep.PartitionOverlaps > 0 {
			break
		}
		if attempt == partitionAttempts {
			t.Fatalf("-break partition: the cut-off worker and the newcomer served no chain ID in common in %d runs: the control shows nothing", attempt)
		}
		t.Logf("attempt %d: no chain ID served by both sides (the cut-off worker held too little); again", attempt)
	}
	chain := rep.Tables[genChain]
	t.Logf("-break partition: %d chain IDs served by the cut-off worker and the newcomer; %d duplicates (%d acknowledged twice), e.g. %v",
		rep.PartitionOverlaps, chain.Duplicates, chain.AckedTwice, rep.DuplicateSamples[:min(2, len(rep.DuplicateSamples))])
	// No worker is killed: both sides insert and acknowledge each such ID.
	if chain.Duplicates == 0 || chain.AckedTwice < rep.PartitionOverlaps {
		t.Errorf("%d chain IDs served by both sides, yet %d duplicates and %d acknowledged twice", rep.PartitionOverlaps, chain.Duplicates, chain.AckedTwice)
	}
	if code != exitFailed || rep.OK {
		t.Errorf("exit status %d, ok %v; want %d and false", code, rep.OK, exitFailed)
	}
	// Only the chains lost their fence: the leases' reservations still stop
	// the cut-off worker's snowflake IDs before the newcomer's first.
	if rep.Tables[genSnowflake].Duplicates != 0 || rep.TickOverlaps != 0 || rep.RowsLost != 0 {
		t.Errorf("snowflake duplicates %d, tick overlaps %d, rows lost %d; want none", rep.Tables[genSnowflake].Duplicates, rep.TickOverlaps, rep.RowsLost)
	}
	for _, s := range rep.DuplicateSamples {
		if s.Generator != genChain || !strings.HasPrefix(s.By, "newcomer") && !strings.HasPrefix(s.Already, "newcomer") {
			t.Errorf("duplicate %v is not a chain ID of the newcomer and the cut-off worker", s)
		}
	}
}

func TestRunsRoundTrip(t *testing.T) {
	ids := []int64{5, 6, 7, 9, 10, 3, 4, 100}
	runs := toRuns(ids)
	want := []idRun{{5, 3}, {9, 2}, {3, 2}, {100, 1}}
	if !slices.Equal(runs, want) {
		t.Fatalf("toRuns(%v) = %v, want %v", ids, runs, want)
	}
	var b bytes.Buffer
	newEmitter(&b).batch(7, genSnowflake, time.UnixMilli(1234), ids)
	ev, err := parseEvent(strings.TrimSuffix(b.String(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != "B 7 snowflake 1234 5:3 9:2 3:2 100\n" || ev.seq != 7 || ev.gen != genSnowflake ||
		!slices.Equal(ev.runs, want) || countRuns(ev.runs) != int64(len(ids)) {
		t.Fatalf("line %q parsed to %+v", b.String(), ev)
	}
	b.Reset()
	newEmitter(&b).refused(genChain, time.UnixMilli(1234))
	if ev, err := parseEvent(strings.TrimSuffix(b.String(), "\n")); err != nil || ev.kind != evRefused || ev.gen != genChain || ev.at.UnixMilli() != 1234 {
		t.Fatalf("line %q parsed to %+v, %v", b.String(), ev, err)
	}
	b.Reset()
	newEmitter(&b).unavailable(genSnowflake, time.UnixMilli(1234), 2500*time.Microsecond, 7*time.Millisecond,
		map[string]int{"machine_id_lost": 3, "store_reset": 1})
	ev, err = parseEvent(strings.TrimSuffix(b.String(), "\n"))
	if err != nil || b.String() != "U snowflake 1234 2500 7000 machine_id_lost=3,store_reset=1\n" || ev.kind != evUnavail ||
		ev.dur != 2500*time.Microsecond || ev.gap != 7*time.Millisecond || ev.refusals["machine_id_lost"] != 3 {
		t.Fatalf("line %q parsed to %+v, %v", b.String(), ev, err)
	}
	for _, bad := range []string{"B 1 snowflake 5 7:0", "B 1 nope 5 7", "C 1", "X 1 2", "U chain 1 2 clock=x", "U chain 1 2 x -",
		"U chain 1 2 3 clock=x", "R chain", "R chain 1 2", ""} {
		if _, err := parseEvent(bad); err == nil {
			t.Errorf("parseEvent(%q) accepted", bad)
		}
	}
}

// The read-back comparison in miniature: union counts IDs acknowledged more
// than once, cursor finds ascending IDs in the merged runs, intersection
// counts the IDs two sets of runs share.
func TestUnionAndCursor(t *testing.T) {
	runs, repeated := union([]idRun{{10, 5}, {1, 3}, {12, 5}, {4, 1}, {30, 1}, {30, 1}})
	// 1..4 adjacent, 10..14 and 12..16 overlap by 3, 30 twice.
	if want := []idRun{{1, 4}, {10, 7}, {30, 1}}; !slices.Equal(runs, want) || repeated != 4 {
		t.Fatalf("union = %v, repeated %d; want %v, 4", runs, repeated, want)
	}
	c := cursor{runs: runs}
	var found []int64
	for id := range int64(35) {
		if c.has(id) {
			found = append(found, id)
		}
	}
	if want := []int64{1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16, 30}; !slices.Equal(found, want) {
		t.Fatalf("cursor found %v, want %v", found, want)
	}
	// partition_overlaps: 3..4, 10 and 14..16 are in both.
	if n := intersection(runs, []idRun{{3, 2}, {8, 3}, {14, 10}}); n != 6 {
		t.Fatalf("intersection = %d, want 6", n)
	}
}

// The fault tallies of the report, fed worker lines as a run would: refused
// NextID calls and pauses between IDs go to the fault running when the ID
// came and affecting the worker, per generator; the rest counts as outside
// faults. Times are given, not measured.
func TestFaultReport(t *testing.T) {
	d := newDriver(config{faults: []string{"long_outage", "pause", "kill"}})
	w1, w2 := &proc{name: "slot-0#1"}, &proc{name: "slot-1#2"}
	t0 := time.UnixMilli(1_000_000)
	ms := func(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	feed := func(p *proc, line string) {
		t.Helper()
		ev, err := parseEvent(line)
		if err != nil {
			t.Fatal(err)
		}
		d.handle(p, ev)
	}
	at := func(n int64) string { return strconv.FormatInt(ms(n).UnixMilli(), 10) }

	// Before any fault: an insert between two IDs.
	feed(w1, "U chain "+at(0)+" 0 12000 -")
	// long_outage on every worker: snowflake refused 40 times over 21 s,
	// chain 3 times; a pause that began before the fault counts whole.
	d.active = &fault{kind: "long_outage", start: ms(1000)}
	d.faults["long_outage"]++
	feed(w1, "U snowflake "+at(900)+" 21100000 21150000 machine_id_lost=39,store_reset=1")
	feed(w2, "U snowflake "+at(2000)+" 5000000 6000000 machine_id_lost=10")
	feed(w2, "U chain "+at(3000)+" 300000 300500 segment_exhausted=3")
	// An ID that came before the fault began is not the fault's.
	feed(w1, "U chain "+at(500)+" 100 400000 -")
	d.active = nil
	// A pause: the 4 s the worker was stopped are not its pause, only the
	// 1.5 s before it issued again after waking.
	d.active = &fault{kind: "pause", procs: []*proc{w2}, start: ms(40_000), stopped: ms(40_000), resumed: ms(44_000)}
	d.faults["pause"]++
	feed(w2, "U snowflake "+at(45_000)+" 500000 5500000 machine_id_lost=2")
	feed(w1, "U snowflake "+at(45_000)+" 0 9000 -") // not paused: outside the fault
	d.active = nil

	r := &report{}
	d.faultReport(r)
	wantRefused := map[string]map[string]int64{
		"long_outage": {genSnowflake: 50, genChain: 3},
		"pause":       {genSnowflake: 2, genChain: 0},
		"kill":        {genSnowflake: 0, genChain: 0},
	}
	wantPause := map[string]map[string]int64{
		"long_outage": {genSnowflake: 21150, genChain: 300},
		"pause":       {genSnowflake: 1500, genChain: 0},
		"kill":        {genSnowflake: 0, genChain: 0},
	}
	if !reflect.DeepEqual(r.IDsRefusedByFault, wantRefused) {
		t.Errorf("ids_refused_by_fault = %v, want %v", r.IDsRefusedByFault, wantRefused)
	}
	if !reflect.DeepEqual(r.MaxPauseByFault, wantPause) {
		t.Errorf("max_pause_ms_by_fault = %v, want %v", r.MaxPauseByFault, wantPause)
	}
	if want := map[string]int64{genSnowflake: 9, genChain: 400}; !reflect.DeepEqual(r.MaxPauseOutsideFaultsMS, want) {
		t.Errorf("max_pause_outside_faults_ms = %v, want %v", r.MaxPauseOutsideFaultsMS, want)
	}
	if u := r.MaxUnavailableByGenerator["long_outage"]; u[genSnowflake] != 21100 || u[genChain] != 300 {
		t.Errorf("max_unavailable_ms_by_generator[long_outage] = %v, want snowflake 21100, chain 300", u)
	}
	if r.RefusalsByFault["long_outage"]["machine_id_lost"] != 49 || r.Refusals["machine_id_lost"] != 51 {
		t.Errorf("refusals %v, by fault %v", r.Refusals, r.RefusalsByFault)
	}
	// kill was requested and never injected.
	if len(d.problems) != 1 || !strings.Contains(d.problems[0], "kill was never injected") {
		t.Errorf("problems %q, want the kill never injected", d.problems)
	}
	// The keys a reader looks for, each generator present even at 0.
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"ids_refused_by_fault":{"kill":{"chain":0,"snowflake":0}`,
		`"max_pause_ms_by_fault":{"kill":{"chain":0,"snowflake":0}`, `"max_pause_outside_faults_ms":{"chain":400,"snowflake":9}`} {
		if !strings.Contains(string(js), k) {
			t.Errorf("report JSON lacks %s:\n%s", k, js)
		}
	}
}

// long_outage is asked for by name: -faults all leaves it out, since its
// default minute would outlast a short run.
func TestLongOutageByName(t *testing.T) {
	for _, store := range []string{"postgres", "mariadb", "redis"} {
		all, err := parseFaults("all", store)
		if err != nil || slices.Contains(all, "long_outage") || !slices.Contains(all, "store_cut") {
			t.Errorf("-faults all on %s = %v, %v; want every kind but long_outage", store, all, err)
		}
		if got, err := parseFaults("long_outage,kill", store); err != nil || !slices.Equal(got, []string{"long_outage", "kill"}) {
			t.Errorf("-faults long_outage,kill on %s = %v, %v", store, got, err)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-store", "sqlite"}, {"-workers", "0"}, {"-faults", "kill,flood"}, {"-break", "everything"}, {"-warmup", "-1s"},
		{"-safeguard", "1s", "-heartbeat", "900ms"}, {"extra"}, {"-store", "postgres", "-faults", "store_reset"},
		{"-fence", "soon"}, {"-fence", "2s"}, {"-fence", "0"}, {"-ride-through", "0"}, {"-ride-through", "500ms", "-heartbeat", "500ms"},
		{"-ride-through", "3s", "-safeguard", "3s"}, {"-break", "partition", "-fence", "500ms"},
		{"-faults", "long_outage", "-outage", "0"}, {"-outage", "-5s"},
		{"-ahead", "-1s"}, {"-faults", "partition_wipe", "-ahead", "2s"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, nil, io.Discard, &stderr); code != exitSetup || stderr.Len() == 0 {
			t.Errorf("run(%q) = %d with %q; want %d and a message", args, code, stderr.String(), exitSetup)
		}
	}
}
