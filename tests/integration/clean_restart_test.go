package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// cleanRestarts is how many workers take the restarting machine ID one
// after another: cleanRestarts-1 restarts.
const cleanRestarts = 34

// TestCleanRestartsOnOneMachineID: a clean Close reverts the machine ID with
// the newest timestamp its generator used (or the predecessor's, or now),
// even below the reservation its heartbeats stored, so a successor on the
// same machine ID starts at once instead of waiting out ~1 s. This tries to
// make that give a successor an ID its predecessor already issued.
//
// The namespace has two machine IDs (a layout of 1 machine bit): a sitter
// holds one for the whole test, so every worker of the chain of restarts
// lands on the other, each right after its predecessor gave it back. Each
// worker draws snowflake IDs as fast as it can and chain IDs at a pace, and
// is started ahead and held at its go gate, so a restart costs no process
// start. Across the restarts, independently of each other:
//
//   - the clock offset cycles +300 ms, 0, -300 ms, so two successors in
//     three run on a clock behind their predecessor's;
//   - every other triple of restarts overlaps: the successor is let go while
//     its predecessor still holds the ID, is refused (the namespace is full)
//     and retries every 20 ms while the predecessor closes;
//   - in every other six the predecessor closes its registry while its
//     generators are still drawn from (Close races NextID in flight);
//   - one predecessor in four steps its clock back 200 ms on "quit", so its
//     generator has used timestamps ahead of the clock Close reads.
//
// No snowflake or chain ID may be issued twice, and no two processes may
// issue in one millisecond of one machine ID; every worker must have issued
// both kinds, and every restart must have reused its predecessor's machine
// ID, or the test proved nothing. It runs on Redis and on PostgreSQL.
func TestCleanRestartsOnOneMachineID(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Run("redis", func(t *testing.T) {
		admin, prefix := testdb.Redis(t) // deletes its keys when the test ends
		if _, err := redisstore.Open(t.Context(), admin, redisstore.Settings{Prefix: prefix, AllowVolatile: true, Init: true}); err != nil {
			t.Fatalf("initialising the store: %v", err)
		}
		cleanRestartsOn(t, workerConfig{Redis: testdb.RedisAddr(), Prefix: prefix, AllowVolatile: true})
	})
	t.Run("postgres", func(t *testing.T) {
		d := testdb.Postgres(t)
		st, err := sqlstore.Open(t.Context(), d.Open(t), sqlstore.Settings{CreateTables: true, Init: true})
		if err != nil {
			t.Fatalf("creating the ID tables: %v", err)
		}
		st.Close()
		cleanRestartsOn(t, workerConfig{SQLDriver: d.Driver, SQLDSN: d.DSN})
	})
}

// restartPlan is what restart i does (restart 0 is the first worker).
type restartPlan struct {
	offset   time.Duration
	overlap  bool // let the successor go before the predecessor quits
	inFlight bool // the predecessor closes while issuing
	stepBack bool // the predecessor steps its clock back on quit
}

func planOf(i int) restartPlan {
	return restartPlan{
		offset:   []time.Duration{300 * time.Millisecond, 0, -300 * time.Millisecond}[i%3],
		overlap:  i > 0 && (i/3)%2 == 1,
		inFlight: (i/6)%2 == 1,
		stepBack: i%4 == 3,
	}
}

func cleanRestartsOn(t *testing.T, store workerConfig) {
	layout := snowflake.Default
	layout.MachineBits = 1 // two machine IDs in the namespace
	base := store
	base.Namespace = testdb.UniqueName("restart-")
	base.Layout = layout
	base.Snowflake = pace{Burst: 256} // as fast as it can
	base.Chain = pace{Burst: 32, Every: time.Millisecond}
	base.ChainStep = 1000

	sit := base
	sit.Name = "sitter"
	sit.Snowflake = pace{Burst: 8, Every: 10 * time.Millisecond}
	sit.Chain = pace{Burst: 8, Every: 10 * time.Millisecond}
	// A restart after the predecessor's exit would never be back to back
	// with the race runtime's sleep at exit.
	env := noExitSleep()
	began := time.Now()
	sitter := startWorker(t, sit, env)
	sitter.waitIssuing(t, began, genSnowflake, genChain)

	cfgOf := func(i int) workerConfig {
		c, p := base, planOf(i)
		c.Name = fmt.Sprintf("w%02d", i)
		c.WaitGo, c.ClockOffset, c.CloseWhileIssuing = true, p.offset, p.inFlight
		if p.stepBack {
			c.StepBackAtQuit = 200 * time.Millisecond
		}
		return c
	}
	cur := startWorker(t, cfgOf(0), env)
	cur.waitGate(t)
	cur.command("go")
	cur.waitIssuing(t, began, genSnowflake, genChain)
	procs := []*workerProc{cur}
	for i := 1; i < cleanRestarts; i++ {
		next := startWorker(t, cfgOf(i), env)
		next.waitGate(t)
		// The predecessor issues both kinds again after its successor is
		// ready to go, for a little longer, and stops at a random moment.
		cur.waitIssuing(t, time.Now(), genSnowflake, genChain)
		time.Sleep(rand.N(100 * time.Millisecond))
		if planOf(i).overlap {
			next.command("go")
			waitRefusedNew(t, next, "machine_id_overflow")
			cur.quit(t)
		} else {
			cur.quit(t)
			next.command("go")
		}
		next.waitIssuing(t, time.Now(), genSnowflake, genChain)
		procs = append(procs, next)
		cur = next
	}
	cur.waitIssuing(t, time.Now(), genSnowflake, genChain)
	cur.quit(t)
	sitter.quit(t)
	all := append([]*workerProc{sitter}, procs...)

	for _, gen := range []string{genSnowflake, genChain} {
		rep := duplicates(gen, all...)
		t.Logf("%s: %d IDs issued by %d processes, %d duplicates, %d shared (machine ID, millisecond) pairs",
			gen, rep.issued, len(all), rep.duplicates, rep.tickOverlaps)
		if rep.duplicates != 0 {
			t.Errorf("%s: %d IDs issued twice across the processes, e.g. %q", gen, rep.duplicates, rep.samples)
		}
		if rep.tickOverlaps != 0 {
			t.Errorf("%s: %d (machine ID, millisecond) pairs issued by two processes, e.g. %q", gen, rep.tickOverlaps, rep.tickSamples)
		}
	}

	// Real work: every process issued both kinds, every restart took the
	// machine ID its predecessor had just given back, the sitter's was
	// another, and the overlapping restarts were refused until it was.
	reused := 0
	var waits []string
	var refusals []string
	for i, p := range all {
		p.mu.Lock()
		machines, issued, took, errs := slices.Clone(p.machines), p.issued, p.took, slices.Clone(p.errs)
		p.mu.Unlock()
		for _, gen := range []string{genSnowflake, genChain} {
			if issued[gen] == 0 {
				t.Errorf("%s issued no %s ID: the test proved nothing", p.name, gen)
			}
		}
		classes := map[string]int{}
		for _, e := range errs {
			gen, class := fields2(e)
			classes[gen+"/"+class]++
		}
		if len(classes) > 0 {
			refusals = append(refusals, fmt.Sprintf("%s %v", p.name, classes))
		}
		switch {
		case len(machines) != 1:
			t.Errorf("%s issued under machine IDs %v, not one", p.name, machines)
			continue
		case p == sitter:
			if machines[0] == procs[0].machine {
				t.Errorf("the sitter and %s both issued under machine ID %d", procs[0].name, machines[0])
			}
			continue
		case i == 1:
			continue
		}
		prev := all[i-1]
		prev.mu.Lock()
		prevID := prev.machines[len(prev.machines)-1]
		prev.mu.Unlock()
		if machines[0] != prevID {
			t.Errorf("%s started on machine ID %d, not its predecessor %s's %d", p.name, machines[0], prev.name, prevID)
			continue
		}
		reused++
		plan := planOf(i - 1)
		if plan.overlap && classes["new/machine_id_overflow"] == 0 {
			t.Errorf("%s was let go while %s held the machine ID but was never refused", p.name, prev.name)
		}
		prevPlan := planOf(i - 2)
		waits = append(waits, fmt.Sprintf("%s (%+v→%+v%s%s%s) %v",
			p.name, prevPlan.offset, plan.offset, mark(plan.overlap, " overlap"), mark(prevPlan.inFlight, " in-flight"),
			mark(prevPlan.stepBack, " step-back"), took.Round(time.Millisecond)))
	}
	t.Logf("%d restarts on machine ID %d, %d of them reusing the predecessor's; the sitter on %v",
		len(procs)-1, procs[0].machine, reused, sitter.machines)
	if reused != len(procs)-1 {
		t.Errorf("only %d of %d restarts reused their predecessor's machine ID", reused, len(procs)-1)
	}
	t.Logf("idforge.New per restart (predecessor's clock offset → successor's; the predecessor's quit): %s", strings.Join(waits, "; "))
	t.Logf("refusals met: %s", strings.Join(refusals, "; "))
}

// waitRefusedNew waits until p's idforge.New was refused with class.
func waitRefusedNew(t *testing.T, p *workerProc, class string) {
	t.Helper()
	eventually(t, p.name+" is refused a machine ID", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.ContainsFunc(p.errs, func(e string) bool {
			gen, c := fields2(e)
			return gen == "new" && c == class
		})
	})
}

func mark(b bool, s string) string {
	if b {
		return s
	}
	return ""
}
