package integration

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// TestPartitionedDuringReset: a process cut off from its store (it cannot
// reach it at all, so no failing heartbeat tells it of the reset) while the
// store is wiped must not issue a snowflake ID that a newcomer, handed the
// same machine ID by the wiped store, issues too.
//
// Per networked store, two arms run side by side under one cut and one wipe,
// each in a namespace of its own. A, a worker process reaching the store
// through a fault proxy, takes machine ID 0 and issues as fast as it can.
// The proxy is cut right after one of A's heartbeats stored its reservation
// (the longest A may go on alone), the store is wiped at once, and B, a
// worker connected directly and held at its go gate until then, calls
// idforge.New in A's namespace and is handed machine ID 0 again.
//
//   - default: default lease and store settings. A stops when its
//     reservation runs out (1 s after that heartbeat), before the store's
//     2 s reset grace lets B issue: no ID, nor any millisecond of the
//     machine ID, may be issued by both.
//   - control: A's lease has no reservation (Lease.Reservation -1) and the
//     store's ResetGrace is hidden from leased.Acquire, which would refuse
//     that: A issues through the partition, and IDs issued twice or
//     milliseconds of the machine ID used by both must be found, or the
//     test could not fail.
//
// Both arms issue until the control has used a millisecond of the machine
// ID in both of its processes (counted from the IDs the workers report, as
// they report them) and the default arm's B has issued since; no phase
// lasts a set time, so a busy machine only makes the test longer. Either
// arm proves something only if A issued after the cut and B got A's
// machine ID; both are checked, and a run whose default A was not scheduled
// between the cut and the end of its reservation is run again on a fresh
// store. The workers run on the system clock, as in the other
// worker-process tests: the servers, the reservation and the grace all
// count real time. Each store runs it under the default window and under a
// 3 s one (longWindow), recorded before the workers start.
func TestPartitionedDuringReset(t *testing.T) {
	partitionTest(t, false)
}

// TestFastNewcomerTakesOver: a process cut off from its store while a
// newcomer whose clock runs ahead reclaims its machine ID must not issue a
// snowflake ID, nor use a millisecond of the machine ID, that the newcomer
// issues too. It is TestPartitionedDuringReset without the wipe: B, in
// both arms, runs on a clock 2W ahead with a SafeGuard of the store's
// window W (the shortest the lease takes) and no SkewMargin, so it finds
// A's machine ID silent for the SafeGuard as soon as it is let go, W
// before A's reservation runs out, and issues while A may still issue.
//
//   - default: A's last heartbeat stored its start + W, which B waits out
//     before its first tick and A never passes.
//   - control: A's lease has no reservation, so its heartbeats store only
//     what it used and it issues through the partition; B issues 2W ahead
//     of A, which reaches B's milliseconds while both issue.
func TestFastNewcomerTakesOver(t *testing.T) {
	partitionTest(t, true)
}

// longWindow is the store's ride-through window the partition tests run
// under besides the default: longer than the default reservation, short
// enough that a newcomer on a wiped store waits only W + 1 s.
const longWindow = 3 * time.Second

// partitionTest runs the partition test, with a wipe or with a fast
// newcomer (takeover), on each networked store under the default window
// and under longWindow. A run that proves nothing (see
// partitionedDuringReset) is run again on a fresh store.
func partitionTest(t *testing.T, takeover bool) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "sqlite" {
				t.Skip("a local database file has no connection to cut")
			}
			for _, w := range []time.Duration{0, longWindow} {
				t.Run("window="+cmp.Or(w, time.Second).String(), func(t *testing.T) {
					for attempt := 1; ; attempt++ {
						s := b.setup(t)
						if w != 0 {
							recordWindow(t, s, w)
						}
						if partitionedDuringReset(t, s, cmp.Or(w, time.Second), takeover) {
							return
						}
						if attempt == partitionAttempts {
							t.Fatalf("in %d runs the default arm's A never issued an ID after the cut: it was never scheduled between the cut "+
								"and the end of its reservation, or it stopped at the cut, and the test proved nothing", attempt)
						}
					}
				})
			}
		})
	}
}

// partitionAttempts bounds the runs of one partition test. A run proves
// nothing when the default arm's A issued no ID after the cut: a process
// is not scheduled for a while on a busy machine, and its reservation
// (W after the heartbeat the cut follows) may run out meanwhile.
const partitionAttempts = 5

// hazardBound is how long both arms may issue side by side before the
// test gives up on the control's hazard: far beyond what it needs (the
// control's B issues 2W ahead of its A at most), and within the 4 minutes
// (SafeGuard less SkewMargin, the defaults) the control's A, which has no
// reservation, goes on issuing after the cut.
const hazardBound = 2 * time.Minute

// partitionArm is one namespace of the partition test: A behind the proxy,
// B the newcomer.
type partitionArm struct {
	name      string
	protected bool
	ns        string
	a, b      *workerProc
}

// recordWindow makes w the window a fresh store s records (-force: no
// one holds an ID yet).
func recordWindow(t *testing.T, s *server, w time.Duration) {
	t.Helper()
	if err := s.setRideThrough(t, w); err != nil {
		t.Fatalf("recording a %v window: %v", w, err)
	}
}

// partitionedDuringReset runs both arms on s, whose recorded window is w;
// takeover replaces the wipe with a newcomer on a fast clock. Every phase
// waits for what the workers report, never for a time: after the cut both
// arms issue side by side until the control has used a millisecond of the
// machine ID twice, the default arm's B has issued since, and the default
// arm's A has been refused (its reservation ran out). It returns false,
// having checked nothing, when the default arm's A issued no ID after the
// cut: the run proved nothing and is to be run again.
func partitionedDuringReset(t *testing.T, s *server, w time.Duration, takeover bool) bool {
	p := startProxy(t, s.target)
	arms := []*partitionArm{{name: "default", protected: true}, {name: "control"}}
	began := time.Now()
	for _, arm := range arms {
		arm.ns = testdb.UniqueName("partition-")
		a := s.worker(p.Addr())
		a.Name, a.Namespace, a.RideThrough = "A-"+arm.name, arm.ns, w
		a.Snowflake = pace{Burst: 256} // as fast as it can
		a.NoReservation, a.HideResetGrace = !arm.protected, !arm.protected
		arm.a = startWorker(t, a, noExitSleep())
		// B opens its store now and waits at its gate, so that its
		// idforge.New follows the wipe by milliseconds, not by a process
		// start: the epoch it creates, and so its grace, starts earliest.
		b := s.worker("")
		b.Name, b.Namespace, b.Snowflake, b.WaitGo, b.RideThrough = "B-"+arm.name, arm.ns, a.Snowflake, true, w
		if takeover {
			b.SafeGuard, b.SkewMargin, b.ClockOffset = w, -1, 2*w
		}
		arm.b = startWorker(t, b, noExitSleep())
	}
	for _, arm := range arms {
		arm.a.waitIssuing(t, began, genSnowflake)
		arm.b.waitGate(t)
	}

	// Cut as soon as a heartbeat of the default arm's A has stored a new
	// reservation: it then issues alone for nearly all of it.
	pa := arms[0].a
	pa.mu.Lock()
	m := pa.machine
	pa.mu.Unlock()
	before := s.lastTimestamp(t, arms[0].ns, m)
	eventually(t, pa.name+"'s next heartbeat", func() bool { return s.lastTimestamp(t, arms[0].ns, m) != before })
	reserved := time.UnixMilli(s.lastTimestamp(t, arms[0].ns, m))
	cut := time.Now()
	p.Cut()
	if !takeover {
		s.wipe(t)
	}
	wiped := time.Now()
	for _, arm := range arms {
		arm.b.command("go")
	}
	for _, arm := range arms {
		arm.b.waitIssuing(t, wiped, genSnowflake)
	}
	hazardAt := issueSideBySide(t, arms[0], arms[1])
	procs := []*workerProc{arms[0].a, arms[0].b, arms[1].a, arms[1].b}
	for _, w := range procs {
		w.command("quit") // all at once: each may take a moment to close
	}
	for _, w := range procs {
		w.quit(t)
	}
	// The reservation is W past the heartbeat's start.
	t.Logf("cut %v after the start, %v after the heartbeat of %s reserving up to %s, %v after the cut; store wiped (or B let go) %v after the cut; "+
		"the control's first shared millisecond seen %v after the cut",
		cut.Sub(began).Round(time.Millisecond), cut.Sub(reserved.Add(-w)).Round(time.Millisecond), pa.name,
		reserved.Format("15:04:05.000"), reserved.Sub(cut).Round(time.Millisecond), wiped.Sub(cut).Round(time.Millisecond),
		hazardAt.Sub(cut).Round(time.Millisecond))

	// The workers' output is complete now: whether the default arm's A
	// issued after the cut is known.
	if n, _, last := issuedSince(pa, cut); n == 0 {
		t.Logf("%s issued no ID after the cut (its last at %s, its reservation up to %s): it was not scheduled in time; "+
			"this run proves nothing, running it again", pa.name, last.Format("15:04:05.000"), reserved.Format("15:04:05.000"))
		return false
	}
	for _, arm := range arms {
		t.Run(arm.name, func(t *testing.T) { checkPartitionArm(t, arm, cut) })
	}
	return true
}

// issueSideBySide lets both arms' workers issue until the control met its
// hazard (a millisecond of the machine ID used by both of its workers), the
// default arm's B issued after that, so it ran at least as long, and the
// default arm's A reported a refusal after its last ID: it stopped, and
// whether for the reason the lease gives is checked after. It returns when
// the control's hazard was seen; it fails the test if that takes longer
// than hazardBound, saying what did not happen.
func issueSideBySide(t *testing.T, def, ctl *partitionArm) time.Time {
	t.Helper()
	meter := newTickMeter(ctl.a, ctl.b)
	var hazardAt time.Time
	deadline := time.Now().Add(hazardBound)
	for {
		if hazardAt.IsZero() && meter.count() > 0 {
			hazardAt = time.Now()
		}
		bRan := !hazardAt.IsZero() && def.b.seenSince(genSnowflake, hazardAt)
		aStopped := def.a.stopped(genSnowflake)
		if bRan && aStopped {
			return hazardAt
		}
		for _, p := range []*workerProc{def.a, def.b, ctl.a, ctl.b} {
			if p.exited() {
				t.Fatalf("worker %s exited while the arms issued: %v\nstderr:\n%s", p.name, p.exitError(), p.stderrText())
			}
		}
		if time.Now().After(deadline) {
			var missing []string
			if hazardAt.IsZero() {
				missing = append(missing, fmt.Sprintf("%s and %s used no millisecond of the machine ID both (%d and %d snowflake IDs reported)",
					ctl.a.name, ctl.b.name, issuedOf(ctl.a), issuedOf(ctl.b)))
			} else if !bRan {
				missing = append(missing, fmt.Sprintf("%s issued nothing after the control's first shared millisecond", def.b.name))
			}
			if !aStopped {
				missing = append(missing, fmt.Sprintf("%s was never refused after its last ID, though cut off from its store", def.a.name))
			}
			t.Fatalf("after %v of both arms issuing: %s", hazardBound, strings.Join(missing, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// issuedOf returns how many snowflake IDs p reported so far.
func issuedOf(p *workerProc) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issued[genSnowflake]
}

func checkPartitionArm(t *testing.T, arm *partitionArm, cut time.Time) {
	a, b := arm.a, arm.b
	a.mu.Lock()
	aMachines, aErrs := slices.Clone(a.machines), slices.Clone(a.errs)
	a.mu.Unlock()
	b.mu.Lock()
	bMachines, bErrs := slices.Clone(b.machines), slices.Clone(b.errs)
	b.mu.Unlock()
	// Without the same machine ID, or without IDs from A past the cut,
	// nothing could collide: the test would prove nothing.
	if len(aMachines) != 1 || len(bMachines) != 1 || aMachines[0] != bMachines[0] {
		t.Fatalf("%s issued under machine IDs %v, %s under %v: want one, the same", a.name, aMachines, b.name, bMachines)
	}
	aAfter, aFirst, aLast := issuedSince(a, cut)
	bAfter, bFirst, bLast := issuedSince(b, cut)
	if aAfter == 0 {
		t.Fatalf("%s issued no ID after the cut (IDs from %s to %s): the test proves nothing",
			a.name, aFirst.Format("15:04:05.000"), aLast.Format("15:04:05.000"))
	}
	rep := duplicates(genSnowflake, a, b)
	t.Logf("machine ID %d: %s issued %d IDs after the cut, the last %v after it; %s issued %d, from %v to %v after the cut; "+
		"%d IDs issued twice, %d milliseconds of the machine ID used by both %q",
		aMachines[0], a.name, aAfter, aLast.Sub(cut).Round(time.Millisecond), b.name, bAfter,
		bFirst.Sub(cut).Round(time.Millisecond), bLast.Sub(cut).Round(time.Millisecond), rep.duplicates, rep.tickOverlaps,
		rep.tickSamples[:min(2, len(rep.tickSamples))])
	t.Logf("refusals: %s %q; %s %q", a.name, classesOf(aErrs), b.name, classesOf(bErrs))

	if !arm.protected {
		// A millisecond of the machine ID used by both is the hazard,
		// whether or not their sequence numbers met in it.
		if rep.duplicates == 0 && rep.tickOverlaps == 0 {
			t.Fatalf("without the reservation (ResetGrace check bypassed) the test found no ID issued twice and no shared millisecond: " +
				"it cannot tell the protection works")
		}
		return
	}
	if rep.duplicates != 0 || rep.tickOverlaps != 0 {
		t.Errorf("partitioned during a reset or a takeover: %d IDs issued twice, %d milliseconds of machine ID %d used by both; e.g. %q %q",
			rep.duplicates, rep.tickOverlaps, aMachines[0], rep.samples, rep.tickSamples)
	}
	// A stopped because its lease ran out, not for want of CPU: it was
	// refused as the lease says, and it never saw the store again.
	if !slices.Contains(classesOf(aErrs), "snowflake/machine_id_lost") {
		t.Errorf("%s was never refused with machine_id_lost after the cut: %q", a.name, aErrs)
	}
}

// issuedSince returns how many snowflake IDs p issued in ticks starting
// after t0, and the times of its oldest and newest ID.
func issuedSince(p *workerProc, t0 time.Time) (n int64, first, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.runs[genSnowflake] {
		at, _, _, err := p.layout.Decode(r.first) // a run is one tick
		if err != nil {
			continue
		}
		if at.After(t0) {
			n += r.count
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return n, first, last
}

// classesOf returns the distinct "gen/class" of a worker's refusal lines.
func classesOf(errs []string) []string {
	var out []string
	for _, e := range errs {
		gen, class := fields2(e)
		if c := gen + "/" + class; !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
