package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/tests/testdb"
)

// fixedMachineID is the machine ID the fixed-ID workers hold (machine.Manual).
const fixedMachineID = 7

// killAndRestart runs a worker on a fixed machine ID issuing snowflake IDs
// as fast as it can, kills it with kill -9 mid-issue, and restarts it with
// its clock offset by clockStep (negative: stepped back, as NTP stepping the
// host clock while the process was down). The restarted process is started
// before the kill and held at a gate, so the restart costs no process
// start-up: it calls idforge.New the moment its predecessor is dead, the
// worst case for the protection. protect false turns the protection off:
// Lease.Reservation -1 and a fresh state directory for each process (no
// state file survives). A store (a worker configuration naming one, zero
// for none) replaces the fixed machine ID with a stable instance's, held in
// the store, whose last heartbeat the restart waits out. It returns both
// processes.
func killAndRestart(t *testing.T, store workerConfig, protect bool, clockStep time.Duration, sfPace pace) (first, restarted *workerProc) {
	t.Helper()
	first, restarted = killAndGo(t, store, protect, clockStep, false, sfPace)
	time.Sleep(500 * time.Millisecond)
	restarted.quit(t)
	return first, restarted
}

// killAndGo is killAndRestart up to the restart's first ID, which it
// returns still issuing. backToFirst replaces clockStep with a step back
// decided at the gate, once the first is dead and its IDs are all read:
// the restart's clock then starts at the first's first millisecond.
func killAndGo(t *testing.T, store workerConfig, protect bool, clockStep time.Duration, backToFirst bool, sfPace pace) (first, restarted *workerProc) {
	t.Helper()
	ns := testdb.UniqueName("fixed-")
	stateDir := t.TempDir()
	cfg := store
	cfg.Namespace, cfg.MachineID, cfg.Snowflake, cfg.NoReservation = ns, fixedMachineID, sfPace, !protect
	if cfg.Redis != "" || cfg.SQLDSN != "" {
		cfg.Instance = "pod-0"
	}
	env := func() string {
		if !protect {
			return leased.StateDirEnv + "=" + t.TempDir()
		}
		return leased.StateDirEnv + "=" + stateDir
	}
	c1 := cfg
	c1.Name = "first"
	first = startWorker(t, c1, env())
	began := time.Now()
	first.waitIssuing(t, began, genSnowflake)
	c2 := cfg
	c2.Name, c2.WaitGo, c2.ClockOffset = "restarted", true, clockStep
	restarted = startWorker(t, c2, env())
	restarted.waitGate(t)
	// Let the first run a few heartbeats (250 ms each), and kill it at a
	// random point between two of them.
	time.Sleep(time.Second + rand.N(250*time.Millisecond))
	first.kill()
	if backToFirst {
		_, _, at, ok := snowflakeTicks(first)
		if !ok {
			t.Fatalf("the first worker was killed without having issued a snowflake ID")
		}
		restarted.command(fmt.Sprintf("go %d", -time.Since(at)))
	} else {
		restarted.command("go")
	}
	restarted.waitIssuing(t, time.Now(), genSnowflake)
	return first, restarted
}

// snowflakeTicks returns the first and last tick of p's snowflake IDs as
// far as the parent has read them, and the time of the first; ok is false
// before any.
func snowflakeTicks(p *workerProc) (lo, hi int64, at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := p.runs[genSnowflake]
	if len(runs) == 0 {
		return 0, 0, time.Time{}, false
	}
	// One generator goroutine reports them, in the order issued.
	shift := p.layout.MachineBits + p.layout.SequenceBits
	at, _, _, _ = p.layout.Decode(runs[0].first)
	return runs[0].first >> shift, runs[len(runs)-1].first >> shift, at, true
}

// TestFixedMachineIDKillClockBack: a process on a fixed machine ID
// (machine.Manual, IDFORGE_STATE_DIR pointed at a temporary directory,
// default options otherwise) is killed with kill -9 mid-issue and restarted
// with its clock 50 ms behind. With the default protection (the lease's
// reservation, written to the local state file by every heartbeat) the
// restart waits out what its predecessor may have issued: no ID twice, no
// millisecond of the machine ID used by both. The control turns the
// protection off (Lease.Reservation -1, no state file surviving) and must
// find a millisecond of the machine ID used by both, or the test could not
// fail. With a store's window on, the same kill and restart runs on each
// networked store under a 3 s window (longWindow) as a stable instance,
// which gets its machine ID back from the store and waits out the last
// heartbeat's reservation.
func TestFixedMachineIDKillClockBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	const step = -50 * time.Millisecond
	full := pace{Burst: 256} // as fast as it can
	// 50 ms is a typical NTP step. With it the first New after the restart is
	// refused only when it lands within about 40 ms of its predecessor's last
	// heartbeat; 500 ms makes it refused nearly always (the predecessor's
	// reservation is then more than Reservation + the 10 ms MaxBackwards default
	// ahead of the clock), so the retry a restarted pod would make is
	// exercised every time: it too must wait out the reservation.
	for _, step := range []time.Duration{step, -500 * time.Millisecond} {
		t.Run(fmt.Sprintf("default%v", step), func(t *testing.T) { killClockBackDefault(t, workerConfig{}, step, full) })
	}
	for _, b := range backends {
		if b.name == "sqlite" {
			continue // no server: nothing a window would ride through
		}
		t.Run("window="+longWindow.String()+"/"+b.name, func(t *testing.T) {
			s := b.setup(t)
			recordWindow(t, s, longWindow)
			store := s.worker("")
			store.RideThrough = longWindow
			for _, step := range []time.Duration{step, -500 * time.Millisecond} {
				t.Run(fmt.Sprint(step), func(t *testing.T) { killClockBackDefault(t, store, step, full) })
			}
		})
	}
	t.Run("control-unprotected", func(t *testing.T) {
		// The hazard the protection removes is a millisecond of the machine
		// ID used by both processes: whether their sequence numbers then
		// meet is chance, so a shared millisecond counts as found as much
		// as an ID issued twice. The restart reuses its predecessor's
		// milliseconds only if its clock reads one of them when it issues,
		// however late the loaded host lets it start: its clock is stepped
		// back, at the gate, to its predecessor's first millisecond, so it
		// goes through every millisecond its predecessor issued in (over a
		// second of them) unless it starts later than that. An attempt ends
		// when the restart shares a millisecond or has issued past its
		// predecessor's last; attempts go on until one shares.
		const attempts = 10
		for i := range attempts {
			p1, p2 := killAndGo(t, workerConfig{}, false, 0, true, full)
			shared, passed := waitShareOrPass(t, p1, p2)
			p2.quit(t)
			rep := duplicates(genSnowflake, p1, p2)
			t.Logf("attempt %d without protection, the restart's clock stepped back to its predecessor's first millisecond: "+
				"%d IDs issued, %d duplicates, %d shared milliseconds, e.g. %q; the restart issued past its predecessor's last millisecond: %v",
				i+1, rep.issued, rep.duplicates, rep.tickOverlaps, rep.tickSamples[:min(2, len(rep.tickSamples))], passed)
			if shared > 0 || rep.duplicates > 0 || rep.tickOverlaps > 0 {
				return
			}
		}
		t.Fatalf("without the reservation and the state file, %d kill -9 and restarts with the clock stepped back to the killed process's "+
			"first millisecond never issued in a millisecond of machine ID %d that the killed process used: the test cannot tell the protection works",
			attempts, fixedMachineID)
	})
}

// waitShareOrPass waits until restarted has issued a snowflake ID in a
// millisecond (of one machine ID) first issued in, returning how many it
// shares, or has issued past first's last millisecond, when none can be
// shared any more (passed). first is dead: its IDs are all read.
func waitShareOrPass(t *testing.T, first, restarted *workerProc) (shared int, passed bool) {
	t.Helper()
	_, last, _, _ := snowflakeTicks(first)
	m := newTickMeter(first, restarted)
	deadline := time.Now().Add(time.Minute)
	for {
		// Read the restart's newest tick before counting: every ID reported
		// up to it is then counted.
		_, hi, _, ok := snowflakeTicks(restarted)
		if n := m.count(); n > 0 || (ok && hi > last) {
			return n, n == 0
		}
		if restarted.exited() {
			t.Fatalf("the restarted worker exited before it issued past its predecessor's last millisecond: %v\nstderr:\n%s",
				restarted.exitError(), restarted.stderrText())
		}
		if time.Now().After(deadline) {
			restarted.mu.Lock()
			errs := slices.Clone(restarted.errs)
			restarted.mu.Unlock()
			t.Fatalf("after a minute the restarted worker has neither issued in a millisecond its predecessor used nor past its last one "+
				"(its newest tick %d, the predecessor's last %d); errors: %q", hi, last, errs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFixedMachineIDRestartWait measures how long idforge.New takes on a
// fixed machine ID right after a kill -9 of the process that held it, with
// default options: the restart waits out the reservation its predecessor's
// last heartbeat stored (up to Lease.Reservation, 1 s). It logs the figures
// (go test -v); it asserts only that no ID was issued twice, never a time.
func TestFixedMachineIDRestartWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	var waits []time.Duration
	for range 5 {
		p1, p2 := killAndRestart(t, workerConfig{}, true, 0, pace{Burst: 64, Every: time.Millisecond})
		if rep := duplicates(genSnowflake, p1, p2); rep.duplicates != 0 || rep.tickOverlaps != 0 {
			t.Errorf("restart after kill -9: %d duplicates, %d shared milliseconds: %q", rep.duplicates, rep.tickOverlaps, rep.tickSamples)
		}
		if p2.refused != 0 {
			t.Errorf("the restart without a clock step was refused %d times: %q", p2.refused, p2.errs)
		}
		waits = append(waits, p2.took)
	}
	slices.Sort(waits)
	t.Logf("idforge.New after kill -9 on a fixed machine ID, default options, %d restarts: min %v, median %v, max %v (all %v)",
		len(waits), waits[0].Round(time.Millisecond), waits[len(waits)/2].Round(time.Millisecond),
		waits[len(waits)-1].Round(time.Millisecond), waits)
}

// fields2 returns the first two space-separated fields of s.
func fields2(s string) (string, string) {
	var f [2]string
	for i := range f {
		for len(s) > 0 && s[0] == ' ' {
			s = s[1:]
		}
		j := 0
		for j < len(s) && s[j] != ' ' {
			j++
		}
		f[i], s = s[:j], s[j:]
	}
	return f[0], f[1]
}

// killClockBackDefault is one kill -9 and restart with the clock stepped
// back by -step, with default options (on store, see killAndRestart): it
// must find no duplicate.
func killClockBackDefault(t *testing.T, store workerConfig, step time.Duration, sfPace pace) {
	p1, p2 := killAndRestart(t, store, true, step, sfPace)
	rep := duplicates(genSnowflake, p1, p2)
	t.Logf("default protection: %d IDs issued (%d before the kill), %d duplicates, %d shared milliseconds; "+
		"the restart's idforge.New took %v after %d refusals %q",
		rep.issued, p1.issued[genSnowflake], rep.duplicates, rep.tickOverlaps, p2.took.Round(time.Millisecond), p2.refused, classesOf(p2.errs))
	if rep.duplicates != 0 || rep.tickOverlaps != 0 {
		t.Errorf("kill -9 and a %v step back on machine ID %d: %d IDs issued twice, %d milliseconds used by both processes; e.g. %q %q",
			-step, fixedMachineID, rep.duplicates, rep.tickOverlaps, rep.samples, rep.tickSamples)
	}
	// A refusal is safe (a restart refused because its machine ID is
	// reserved further ahead than it may wait, or, on a store, still held
	// by its predecessor's last heartbeat), but only of that kind.
	onStore := store.Redis != "" || store.SQLDSN != ""
	for _, e := range p2.errs {
		if gen, class := fields2(e); gen != "new" || (class != "clock_backwards" && (!onStore || class != "instance_in_use")) {
			t.Errorf("the restart met a refusal other than a clock_backwards or instance_in_use at New: %s", e)
		}
	}
	if !slices.Equal(p1.machines, p2.machines) || len(p1.machines) != 1 {
		t.Errorf("the first issued under machine IDs %v, the restart under %v: want one, the same", p1.machines, p2.machines)
	}
	if p1.issued[genSnowflake] == 0 || p2.issued[genSnowflake] == 0 {
		t.Errorf("issued %d before the kill and %d after: the test proved nothing", p1.issued[genSnowflake], p2.issued[genSnowflake])
	}
}
