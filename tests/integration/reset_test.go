package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// TestRedisRestartUnderLoad restarts a Redis of the test's own under worker
// processes that issue snowflake and chain IDs through idforge.New on a
// redisstore store, with default lease and chain options:
//
//   - fast: draws both generators continuously, with a small chain step, so
//     its chain fetches ranges all the time;
//   - slow: draws a few IDs a second with a chain step so large that it
//     never needs another range;
//   - late: started right after the restart, in the same namespace, drawing
//     like fast, racing the running processes' next heartbeats;
//   - later: started 700 ms after the restart, drawing like slow.
//
// Volatile: the Redis runs without persistence and is restarted with
// SHUTDOWN NOSAVE, so it comes back empty (the failure this reproduces: before
// the store epoch, late was handed machine ID 0 and chain ranges from 1 on,
// while fast and slow still used both). Durable: the Redis runs with AOF and
// appendfsync always, is killed with kill -9 and restarted from its AOF.
//
// Either way no snowflake or chain ID may be issued twice across the
// processes, no two processes may issue under one machine ID in one
// millisecond, and every refusal a process meets must be one the design
// allows: the reset (engine.ErrStoreReset), a lost machine ID
// (engine.ErrMachineIDLost) or, while the Redis is down, an exhausted chain
// naming the store's failure or an unavailable store. After a volatile
// restart a chain refusal that names neither the reset nor a store failure
// fails the test: a process must issue safely or say why it refuses. After a volatile restart the processes that
// were running must have noticed (their lease was lost and replaced); after
// a durable one nothing may look like a reset.
func TestRedisRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and worker processes; skipped with -short")
	}
	for _, tc := range []struct {
		name    string
		durable bool
	}{
		{"volatile-shutdown-nosave", false},
		{"aof-always-kill-9", true},
	} {
		t.Run(tc.name, func(t *testing.T) { restartUnderLoad(t, tc.durable) })
	}
}

func restartUnderLoad(t *testing.T, durable bool) {
	args := testdb.RedisVolatile()
	if durable {
		args = testdb.RedisDurable()
	}
	srv := testdb.StartRedisServer(t, args...)
	ns := testdb.UniqueName("reset-")
	fast := workerConfig{
		Namespace: ns, Redis: srv.Addr(), AllowVolatile: !durable,
		Snowflake: pace{Burst: 20, Every: time.Millisecond},
		Chain:     pace{Burst: 20, Every: time.Millisecond},
		ChainStep: 100,
	}
	slow := fast
	slow.Snowflake, slow.Chain = pace{Burst: 1, Every: 200 * time.Millisecond}, pace{Burst: 1, Every: 200 * time.Millisecond}
	slow.ChainStep = 1_000_000 // never refetches in this test
	withName := func(c workerConfig, name string) workerConfig { c.Name = name; return c }
	first := func(c workerConfig, name string) workerConfig { c.Init = true; return withName(c, name) }

	started := time.Now()
	pf := startWorker(t, first(fast, "fast"))
	ps := startWorker(t, first(slow, "slow"))
	pf.waitIssuing(t, started, genSnowflake, genChain)
	ps.waitIssuing(t, started, genSnowflake, genChain)
	time.Sleep(time.Second) // load before the restart

	restarted := time.Now()
	if durable {
		srv.Kill()
	} else if err := srv.ShutdownNoSave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys, err := srv.Client(t).DBSize(t.Context()).Result()
	if err != nil {
		t.Fatalf("DBSIZE on %s: %v", srv.Addr(), err)
	}
	t.Logf("Redis restarted in %v, holding %d keys right after (durable %v)", time.Since(restarted).Round(time.Millisecond), keys, durable)
	if durable && keys == 0 {
		t.Errorf("the Redis restarted from its AOF holds no key")
	}

	// New processes within a second of the restart: one at once, racing the
	// running processes' heartbeats, one 700 ms later.
	lateStart := time.Now()
	pl := startWorker(t, withName(fast, "late"))
	time.Sleep(700 * time.Millisecond)
	pl2 := startWorker(t, withName(slow, "later"))
	pl.waitIssuing(t, lateStart, genSnowflake, genChain)
	pl2.waitIssuing(t, lateStart, genSnowflake, genChain)
	procs := []*workerProc{pf, ps, pl, pl2}
	// Everyone issues again, after the late processes started issuing.
	since := time.Now()
	for _, p := range procs {
		p.waitIssuing(t, since, genSnowflake, genChain)
	}
	time.Sleep(time.Second)
	for _, p := range procs {
		p.quit(t)
	}

	for _, gen := range []string{genSnowflake, genChain} {
		rep := duplicates(gen, procs...)
		t.Logf("%s: %d IDs issued, %d duplicates %q", gen, rep.issued, rep.duplicates, rep.samples)
		if rep.duplicates != 0 {
			t.Errorf("%s: %d IDs issued twice across the processes, e.g. %q", gen, rep.duplicates, rep.samples)
		}
		if rep.tickOverlaps != 0 {
			t.Errorf("%s: %d (machine ID, millisecond) pairs issued by two processes, e.g. %q", gen, rep.tickOverlaps, rep.tickSamples)
		}
	}
	// A refusal must name the reset, or the store failure that caused it
	// while Redis was down. A chain that refuses with "the store has not
	// failed" names neither: allowed only when the Redis kept its data (it
	// was then merely slow to come back).
	// A process started after a wipe refuses chains (no_floor) until a
	// running one has re-seeded them above what it handed out.
	allowed := []string{"store_reset", "machine_id_lost", "segment_exhausted", "store_unavailable", "no_floor"}
	if durable {
		allowed = append(allowed, "unexplained")
	}
	for _, p := range procs {
		p.mu.Lock()
		t.Logf("%s: machine IDs %v, New took %v, issued %v; stats (lost, discarded, refusals): %s; %d refusal lines",
			p.name, p.machines, p.took.Round(time.Millisecond), p.issued, p.stats, len(p.errs))
		sawReset := false
		for _, e := range p.errs {
			gen, rest, _ := strings.Cut(e, " ")
			class, msg, _ := strings.Cut(rest, " ")
			if len(p.errs) <= 20 {
				t.Logf("  %s %s: %s", gen, class, msg)
			}
			if class == "store_reset" {
				sawReset = true
			}
			if !slices.Contains(allowed, class) {
				t.Errorf("%s: refusal of %s of class %s is not one the design allows: %s", p.name, gen, class, msg)
			}
		}
		var lost, discarded int64
		statsOK := parseStats(p.stats, &lost, &discarded)
		p.mu.Unlock()
		if !statsOK {
			t.Errorf("%s reported no stats at exit (%q)", p.name, p.stats)
			continue
		}
		switch {
		case durable && (sawReset || lost > 0):
			t.Errorf("%s: after a restart from an AOF with appendfsync always, it saw a store reset (%v) or lost its machine ID (%d times)", p.name, sawReset, lost)
		case !durable && (p == pf || p == ps) && lost == 0:
			t.Errorf("%s ran across the volatile restart but its lease was never lost and replaced: it did not notice the reset", p.name)
		case !durable && p == ps && discarded == 0:
			// It holds most of a million-ID range when Redis forgets it.
			t.Errorf("%s held chain IDs across the volatile restart but its chain dropped none of them", p.name)
		}
	}
}

// parseStats reads "<lost> <discarded> ..." from a worker's stats line.
func parseStats(s string, lost, discarded *int64) bool {
	f := strings.Fields(s)
	if len(f) < 2 {
		return false
	}
	var err1, err2 error
	*lost, err1 = parseInt(f[0])
	*discarded, err2 = parseInt(f[1])
	return err1 == nil && err2 == nil
}
