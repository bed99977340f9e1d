package integration

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/tests/testdb"
)

// noMachineEnv is the environment of a worker that configures no machine
// ID, whatever the test's own environment says.
func noMachineEnv(stateDir string) []string {
	return []string{"IDFORGE_MACHINE_ID=", "KUBERNETES_SERVICE_HOST=", leased.StateDirEnv + "=" + stateDir}
}

// waitRefusedAtNew waits until the worker reported a refused idforge.New of
// class, and returns the message.
func (p *workerProc) waitRefusedAtNew(t *testing.T, class string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		for _, e := range p.errs {
			if msg, ok := strings.CutPrefix(e, "new "+class+" "); ok {
				p.mu.Unlock()
				return msg
			}
		}
		ready, errs := p.ready, slices.Clone(p.errs)
		p.mu.Unlock()
		if ready {
			t.Fatalf("worker %s started (refusals before: %q); want it refused with %s", p.name, errs, class)
		}
		select {
		case <-p.done:
			t.Fatalf("worker %s exited before it was refused: %v\nstderr:\n%s", p.name, p.exitError(), p.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s was not refused with %s within a minute; refusals: %q", p.name, class, errs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFixedMachineIDOneProcessPerHost: two processes on one host with one
// fixed machine ID (IDFORGE_MACHINE_ID, or machine.Manual) and one state
// directory, the default otherwise. The second is refused at idforge.New
// with ErrInstanceInUse naming the machine ID, the lock file, the first's
// PID and what to do, and keeps retrying (as a restarted pod would). Then
// the first is killed with kill -9: the system releases its lock, the
// second takes the machine ID over and waits out what the first may have
// issued (its state file), so no ID and no millisecond of the machine ID
// is used by both.
func TestFixedMachineIDOneProcessPerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	const id = 5
	for _, how := range []string{"IDFORGE_MACHINE_ID", "Manual"} {
		t.Run(how, func(t *testing.T) {
			stateDir := t.TempDir()
			ns := testdb.UniqueName("lock-")
			cfg := workerConfig{Namespace: ns, Snowflake: pace{Burst: 256}}
			env := noMachineEnv(stateDir)
			if how == "Manual" {
				cfg.MachineID = id
			} else {
				cfg.DefaultMachine = true
				env = append(env, "IDFORGE_MACHINE_ID="+strconv.Itoa(id))
			}
			c1, c2 := cfg, cfg
			c1.Name, c2.Name = "first", "second"
			first := startWorker(t, c1, env...)
			first.waitIssuing(t, time.Now(), genSnowflake)
			second := startWorker(t, c2, env...)
			msg := second.waitRefusedAtNew(t, reason.InstanceInUse)
			t.Logf("the second is refused: %s", msg)
			lock := filepath.Join(stateDir, ns+"#"+strconv.Itoa(id)+".lock")
			for _, want := range []string{fmt.Sprintf("machine ID %d ", id), lock, fmt.Sprintf("process %d ", first.cmd.Process.Pid),
				"IDFORGE_MACHINE_ID", "shared store"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal of the second process does not say %q: %s", want, msg)
				}
			}

			// Let the first issue a few heartbeats more, then kill it.
			time.Sleep(300 * time.Millisecond)
			first.kill()
			second.waitIssuing(t, time.Now(), genSnowflake)
			time.Sleep(300 * time.Millisecond)
			second.quit(t)

			rep := duplicates(genSnowflake, first, second)
			t.Logf("%d IDs issued (%d by the first), %d duplicates, %d shared milliseconds; the second was refused %d times, then its New took %v",
				rep.issued, first.issued[genSnowflake], rep.duplicates, rep.tickOverlaps, second.refused, second.took.Round(time.Millisecond))
			if rep.duplicates != 0 || rep.tickOverlaps != 0 {
				t.Errorf("kill -9 and takeover of machine ID %d: %d IDs issued twice, %d milliseconds used by both; e.g. %q %q",
					id, rep.duplicates, rep.tickOverlaps, rep.samples, rep.tickSamples)
			}
			if !slices.Equal(first.machines, []int64{id}) || !slices.Equal(second.machines, []int64{id}) {
				t.Errorf("the first issued under machine IDs %v, the second under %v; want %d both", first.machines, second.machines, id)
			}
			if first.issued[genSnowflake] == 0 || second.issued[genSnowflake] == 0 {
				t.Errorf("issued %d before the kill and %d after: the test proved nothing", first.issued[genSnowflake], second.issued[genSnowflake])
			}
		})
	}
}

// TestDefaultMachineIDsOnOneHost: twenty processes with no machine ID
// configured (no IDFORGE_MACHINE_ID, no StatefulSet, no store) in one
// state directory, all issuing at once, as twenty test binaries or `go
// run`s would: each takes a machine ID of its own, the lowest free, and
// says which in one warning; no ID is issued twice.
func TestDefaultMachineIDsOnOneHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	const n = 20
	stateDir := t.TempDir()
	ns := testdb.UniqueName("default-")
	procs := make([]*workerProc, n)
	for i := range procs {
		procs[i] = startWorker(t, workerConfig{Name: fmt.Sprint("p", i), Namespace: ns, DefaultMachine: true,
			Snowflake: pace{Burst: 256, Every: time.Millisecond}}, noMachineEnv(stateDir)...)
	}
	start := time.Now()
	for _, p := range procs {
		p.waitIssuing(t, start, genSnowflake)
	}
	// All twenty hold their machine IDs now; let them issue side by side.
	since := time.Now()
	for _, p := range procs {
		p.waitIssuing(t, since, genSnowflake)
	}
	for _, p := range procs {
		p.quit(t)
	}

	seen := map[int64]string{}
	for _, p := range procs {
		if len(p.machines) != 1 {
			t.Errorf("%s issued under machine IDs %v; want one", p.name, p.machines)
			continue
		}
		m := p.machines[0]
		if other, ok := seen[m]; ok {
			t.Errorf("%s and %s both hold machine ID %d", other, p.name, m)
		}
		seen[m] = p.name
		if p.refused != 0 {
			t.Errorf("%s was refused %d times at New: %q", p.name, p.refused, p.errs)
		}
		if logged := p.stderrText(); strings.Count(logged, "took machine ID") != 1 || !strings.Contains(logged, fmt.Sprintf("took machine ID %d,", m)) {
			t.Errorf("%s holds machine ID %d and logged:\n%s\nwant one line saying it took %d", p.name, m, logged, m)
		}
	}
	for m := range int64(n) {
		if _, ok := seen[m]; !ok {
			t.Errorf("machine ID %d is held by none of the %d processes (%v): not the lowest free", m, n, seen)
		}
	}
	rep := duplicates(genSnowflake, procs...)
	t.Logf("%d processes on machine IDs %v: %d IDs issued, %d duplicates, %d shared milliseconds", n, slices.Sorted(maps.Keys(seen)), rep.issued, rep.duplicates, rep.tickOverlaps)
	if rep.duplicates != 0 || rep.tickOverlaps != 0 {
		t.Errorf("%d IDs issued twice, %d milliseconds of one machine ID used by two processes; e.g. %q %q", rep.duplicates, rep.tickOverlaps, rep.samples, rep.tickSamples)
	}
	if rep.issued == 0 {
		t.Error("no ID issued: the test proved nothing")
	}
}
