package integration

import (
	"cmp"
	"slices"
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
// Either arm proves something only if A issued after the cut and B got A's
// machine ID; both are checked. The workers run on the system clock, as in
// the other worker-process tests: the servers, the reservation and the grace
// all count real time. Each store runs it under the default window and
// under a 3 s one (longWindow), recorded before the workers start.
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
// and under longWindow.
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
					s := b.setup(t)
					if w != 0 {
						recordWindow(t, s, w)
					}
					partitionedDuringReset(t, s, cmp.Or(w, time.Second), takeover)
				})
			}
		})
	}
}

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
// takeover replaces the wipe with a newcomer on a fast clock.
func partitionedDuringReset(t *testing.T, s *server, w time.Duration, takeover bool) {
	// How long B issues: the control's A still issues all along. A fast
	// newcomer's milliseconds are 2W ahead of the control's A.
	overlap := time.Second
	if takeover {
		overlap = 2*w + time.Second
	}
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
	time.Sleep(overlap)
	procs := []*workerProc{arms[0].a, arms[0].b, arms[1].a, arms[1].b}
	for _, w := range procs {
		w.command("quit") // all at once: each may take a moment to close
	}
	for _, w := range procs {
		w.quit(t)
	}
	// The reservation is W past the heartbeat's start.
	t.Logf("cut %v after the start, %v after the heartbeat of %s reserving up to %s, %v after the cut; store wiped (or B let go) %v after the cut",
		cut.Sub(began).Round(time.Millisecond), cut.Sub(reserved.Add(-w)).Round(time.Millisecond), pa.name,
		reserved.Format("15:04:05.000"), reserved.Sub(cut).Round(time.Millisecond), wiped.Sub(cut).Round(time.Millisecond))

	for _, arm := range arms {
		t.Run(arm.name, func(t *testing.T) { checkPartitionArm(t, arm, cut) })
	}
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
