package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

const safeGuard = time.Minute

var epoch = time.Date(2026, 6, 23, 13, 17, 30, 0, time.UTC)

func fakeStore(t *testing.T, d testdb.DB) (*sqlstore.Store, *clocktest.Fake) {
	t.Helper()
	c := clocktest.NewFake(epoch)
	return openStore(t, d, sqlstore.Settings{Clock: c}), c
}

func unstable(id string) machine.Instance { return machine.Instance{Namespace: "svc", ID: id} }

func distribute(t *testing.T, m machine.Distributor, inst machine.Instance, bits int) machine.State {
	t.Helper()
	st, err := m.Distribute(t.Context(), inst, bits, safeGuard)
	if err != nil {
		t.Fatalf("Distribute(%s): %v", inst.ID, err)
	}
	return st
}

// TestMachineRace has 64 instances on 8 pools race for 6 machine bits three
// times: for new numbers, for the rows they all reverted, and for the rows
// they let expire. Each round hands out 64 distinct IDs and the 65th
// instance overflows.
func TestMachineRace(t *testing.T) {
	const bits, instances, pools = 6, 64, 8
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		c := clocktest.NewFake(epoch)
		var ms [pools]*sqlstore.Store
		for i := range ms {
			db := d.Open(t)
			db.SetMaxOpenConns(2)
			ms[i] = storeOn(t, db, sqlstore.Settings{Clock: c})
		}
		race := func(round string) []machine.State {
			t.Helper()
			states := make([]machine.State, instances)
			errs := make([]error, instances)
			var wg sync.WaitGroup
			for i := range instances {
				wg.Go(func() {
					states[i], errs[i] = ms[i%pools].Distribute(ctx, unstable(fmt.Sprintf("%s-%d", round, i)), bits, safeGuard)
				})
			}
			wg.Wait()
			seen := map[int64]int{}
			for i, st := range states {
				if errs[i] != nil {
					t.Fatalf("%s: instance %d: %v", round, i, errs[i])
				}
				if st.MachineID < 0 || st.MachineID >= 1<<bits {
					t.Fatalf("%s: instance %d got %d, outside %d bits", round, i, st.MachineID, bits)
				}
				if j, dup := seen[st.MachineID]; dup {
					t.Fatalf("%s: instances %d and %d both got machine ID %d", round, j, i, st.MachineID)
				}
				seen[st.MachineID] = i
			}
			_, err := ms[0].Distribute(ctx, unstable(round+"-late"), bits, safeGuard)
			if !errors.Is(err, engine.ErrMachineIDOverflow) || !strings.Contains(err.Error(), `"svc"`) || !strings.Contains(err.Error(), "6 bits") {
				t.Fatalf("%s: 65th instance: err = %v; want ErrMachineIDOverflow naming namespace and bits", round, err)
			}
			return states
		}

		states := race("new")
		for i, st := range states {
			st.LastTimestamp = epoch.UnixMilli() + int64(i)
			if err := ms[i%pools].Revert(ctx, unstable(fmt.Sprintf("new-%d", i)), st); err != nil {
				t.Fatal(err)
			}
		}
		reverted := race("free")
		var reclaimedTS int64
		for _, st := range reverted {
			reclaimedTS = max(reclaimedTS, st.LastTimestamp)
		}
		if reclaimedTS != epoch.UnixMilli()+instances-1 {
			t.Errorf("reclaimed rows carry last timestamps up to %d, want %d", reclaimedTS, epoch.UnixMilli()+instances-1)
		}
		c.Advance(safeGuard + time.Second) // past the newest reverted timestamp too
		race("expired")
		assertRows(t, d, instances)
	})
}

// assertRows checks that the namespace never grew past n rows: reclaiming
// reuses rows instead of inserting.
func assertRows(t *testing.T, d testdb.DB, n int) {
	t.Helper()
	var rows int
	if err := d.Open(t).QueryRow(d.Rebind("SELECT COUNT(*) FROM idforge_machine WHERE namespace = ?"), "svc").Scan(&rows); err != nil || rows != n {
		t.Errorf("machine rows = %d, %v; want %d", rows, err, n)
	}
}

func TestMachineSelfNewAndReclaim(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		m, c := fakeStore(t, d)
		a, b := unstable("a"), unstable("b")
		stA := distribute(t, m, a, 10)
		stB := distribute(t, m, b, 10)
		if stA.MachineID != 0 || stB.MachineID != 1 || stA.LastTimestamp != 0 {
			t.Fatalf("new IDs: a=%+v b=%+v; want 0 and 1 with no last timestamp", stA, stB)
		}
		if stA = distribute(t, m, a, 10); stA.MachineID != 0 {
			t.Errorf("a asking again got %d; want its own 0", stA.MachineID)
		}

		// a heartbeats; b does not. Until a full safe guard has passed since
		// its claim, b's row cannot be reclaimed.
		c.Advance(safeGuard / 2)
		stA.LastTimestamp = c.Now().UnixMilli()
		if err := m.Guard(ctx, a, stA); err != nil {
			t.Fatal(err)
		}
		c.Advance(safeGuard/2 - time.Millisecond)
		if st := distribute(t, m, unstable("c"), 10); st.MachineID != 2 {
			t.Errorf("c got %d while a and b are alive; want the new 2", st.MachineID)
		}
		// Now b's claim is a full safe guard old: d takes it, a keeps 0.
		c.Advance(time.Millisecond)
		stD := distribute(t, m, unstable("d"), 10)
		if stD.MachineID != 1 {
			t.Fatalf("d got %d; want b's expired 1", stD.MachineID)
		}
		if err := m.Guard(ctx, b, stB); !errors.Is(err, engine.ErrMachineIDLost) || !strings.Contains(err.Error(), `"b"`) {
			t.Errorf("b's heartbeat after the takeover: err = %v; want ErrMachineIDLost naming b", err)
		}
		if err := m.Revert(ctx, b, stB); !errors.Is(err, engine.ErrMachineIDLost) {
			t.Errorf("b's revert after the takeover: err = %v; want ErrMachineIDLost", err)
		}
		// Once a has been silent for a safe guard too, e reclaims 0 and
		// receives a's last heartbeat to wait out.
		c.Advance(safeGuard)
		stE := distribute(t, m, unstable("e"), 10)
		if stE.MachineID != 0 || stE.LastTimestamp != stA.LastTimestamp {
			t.Errorf("e got %+v; want a's 0 with last timestamp %d", stE, stA.LastTimestamp)
		}
		assertRows(t, d, 3)
	})
}

func TestMachineStableKeepsItsID(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		m, c := fakeStore(t, d)
		s := machine.Instance{Namespace: "svc", ID: "pod-0", Stable: true}
		st := distribute(t, m, s, 4)
		st.LastTimestamp = c.Now().UnixMilli() + 5
		if err := m.Revert(ctx, s, st); err != nil {
			t.Fatal(err)
		}
		c.Advance(10 * safeGuard)
		if other := distribute(t, m, unstable("x"), 4); other.MachineID == st.MachineID {
			t.Fatalf("x took the stable instance's %d", st.MachineID)
		}
		back := distribute(t, m, s, 4)
		if back.MachineID != st.MachineID || back.LastTimestamp != st.LastTimestamp {
			t.Errorf("stable instance back: %+v; want machine ID %d with LastTimestamp %d", back, st.MachineID, st.LastTimestamp)
		}
		if err := m.Guard(ctx, s, back); err != nil {
			t.Errorf("stable heartbeat: %v", err)
		}
	})
}

func TestMachineRevertFreesAndStoresTimestamp(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		m, c := fakeStore(t, d)
		u := unstable("u")
		st := distribute(t, m, u, 4)
		ahead := c.Now().Add(3 * time.Second).UnixMilli() // the clock was ahead
		st.LastTimestamp = ahead
		if err := m.Guard(ctx, u, st); err != nil {
			t.Fatal(err)
		}
		// A heartbeat never moves the stored timestamp back.
		if err := m.Guard(ctx, u, machine.State{MachineID: st.MachineID, LastTimestamp: ahead - 1000, Holder: st.Holder}); err != nil {
			t.Fatal(err)
		}
		// The clean stop used less than its heartbeats reserved: Revert
		// stores what was used, not the reservation.
		used := ahead - 2000
		if err := m.Revert(ctx, u, machine.State{MachineID: st.MachineID, LastTimestamp: used, Holder: st.Holder}); err != nil {
			t.Fatal(err)
		}
		// Free once the clock passed it (a row stamped ahead goes out last),
		// no safe guard to wait for, with the timestamp to wait out.
		c.Advance(2 * time.Second)
		v := distribute(t, m, unstable("v"), 4)
		if v.MachineID != st.MachineID || v.LastTimestamp != used {
			t.Errorf("v got %+v; want machine %d with last timestamp %d", v, st.MachineID, used)
		}
		if err := m.Guard(ctx, u, st); !errors.Is(err, engine.ErrMachineIDLost) {
			t.Errorf("u's heartbeat after reverting: err = %v; want ErrMachineIDLost", err)
		}
	})
}

// TestMachineFewerBits: an instance whose own row lies beyond a narrower
// layout's limit gives it back and takes a number within the limit.
func TestMachineFewerBits(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		m, _ := fakeStore(t, d)
		sts := make([]machine.State, 3)
		for i := range sts {
			sts[i] = distribute(t, m, unstable(fmt.Sprint(i)), 2)
		}
		if _, err := m.Distribute(ctx, unstable("2"), 1, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
			t.Fatalf("1 bit with 0 and 1 alive: err = %v; want overflow", err)
		}
		if err := m.Revert(ctx, unstable("0"), sts[0]); err != nil {
			t.Fatal(err)
		}
		if st := distribute(t, m, unstable("2"), 1); st.MachineID != 0 {
			t.Errorf("instance 2 with 1 bit got %d; want the freed 0", st.MachineID)
		}
		if st := distribute(t, m, unstable("3"), 2); st.MachineID != 2 {
			t.Errorf("instance 3 got %d; want 2, which instance 2 gave back", st.MachineID)
		}
	})
}

// TestMachineRoundTrips counts the statements of each path against the
// numbers Store.Distribute documents.
func TestMachineRoundTrips(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		db, n := countingDB(t, d)
		c := clocktest.NewFake(epoch)
		m := storeOn(t, db, sqlstore.Settings{Clock: c})
		db.SetMaxOpenConns(1) // every statement prepared once, on one connection
		mysql := d.Name == "mariadb"
		want := map[string]int64{"new": 2, "self": 1, "guard": 1, "revert": 1, "reclaim": 1, "refusal": 1, "ahead": 4}
		if mysql {
			want["new"], want["self"], want["reclaim"], want["refusal"] = 3, 2, 2, 2
		}
		// Prepare everything once, outside the count.
		distribute(t, m, unstable("warm"), 8)
		warm := distribute(t, m, unstable("warm"), 8)
		if err := m.Revert(ctx, unstable("warm"), warm); err != nil {
			t.Fatal(err)
		}
		warm = distribute(t, m, unstable("warm2"), 8)
		if err := m.Guard(ctx, unstable("warm2"), warm); err != nil {
			t.Fatal(err)
		}
		distribute(t, m, unstable("warm3"), 8)
		// A namespace of two IDs: one held, one given back stamped ahead.
		ahead := func(id string) machine.Instance { return machine.Instance{Namespace: "ahead", ID: id} }
		x0 := distribute(t, m, ahead("x0"), 1)
		distribute(t, m, ahead("x1"), 1)
		if _, err := m.Distribute(ctx, ahead("x2"), 1, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
			t.Fatalf("a full namespace: %v, want overflow", err)
		}
		x0.LastTimestamp = c.Now().Add(time.Hour).UnixMilli()
		if err := m.Revert(ctx, ahead("x0"), x0); err != nil {
			t.Fatal(err)
		}

		var st machine.State
		check := func(path string, f func()) {
			t.Helper()
			prepares, statements, begins := n.delta(f)
			if statements != want[path] || prepares != 0 || begins != 0 {
				t.Errorf("%s: %d statements, %d prepares, %d transactions; want %d, 0, 0", path, statements, prepares, begins, want[path])
			}
		}
		a := unstable("a")
		check("new", func() { st = distribute(t, m, a, 8) })
		check("self", func() { st = distribute(t, m, a, 8) })
		check("guard", func() {
			if err := m.Guard(ctx, a, st); err != nil {
				t.Fatal(err)
			}
		})
		check("revert", func() {
			if err := m.Revert(ctx, a, st); err != nil {
				t.Fatal(err)
			}
		})
		check("reclaim", func() { distribute(t, m, unstable("b"), 8) })
		pod := machine.Instance{Namespace: "svc", ID: "pod-0", Stable: true}
		distribute(t, m, pod, 8)
		check("refusal", func() {
			if _, err := m.Distribute(ctx, pod, 8, safeGuard); !errors.Is(err, engine.ErrInstanceInUse) {
				t.Errorf("a second process on pod-0: %v, want ErrInstanceInUse", err)
			}
		})
		check("ahead", func() {
			if st := distribute(t, m, ahead("y"), 1); st.MachineID != x0.MachineID {
				t.Errorf("y got machine ID %d, want %d, stamped ahead but the only one left", st.MachineID, x0.MachineID)
			}
		})
	})
}

func TestMachineInvalidArguments(t *testing.T) {
	m := openStore(t, testdb.SQLite(t), sqlstore.Settings{CreateTables: true})
	ctx := context.Background()
	ok := unstable("ok")
	for _, tc := range []struct {
		name string
		inst machine.Instance
		bits int
		sg   time.Duration
	}{
		{"no namespace", machine.Instance{ID: "x"}, 10, safeGuard},
		{"no instance", machine.Instance{Namespace: "svc"}, 10, safeGuard},
		{"long namespace", machine.Instance{Namespace: strings.Repeat("n", 129), ID: "x"}, 10, safeGuard},
		{"long instance", machine.Instance{Namespace: "svc", ID: strings.Repeat("i", 256)}, 10, safeGuard},
		{"0 bits", ok, 0, safeGuard},
		{"32 bits", ok, 32, safeGuard},
		{"no safe guard", ok, 10, 0},
	} {
		if _, err := m.Distribute(ctx, tc.inst, tc.bits, tc.sg); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: err = %v; want ErrInvalidConfig", tc.name, err)
		}
	}
	if err := m.Guard(ctx, machine.Instance{}, machine.State{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Guard without instance: err = %v", err)
	}
}

func TestMachineStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		db := d.Open(t)
		m := storeOn(t, db)
		db.Close()
		inst := unstable("gone")
		_, err := m.Distribute(ctx, inst, 10, safeGuard)
		if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), `"gone"`) {
			t.Errorf("Distribute: err = %v; want ErrStoreUnavailable naming the instance", err)
		}
		if err := m.Guard(ctx, inst, machine.State{}); !errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, engine.ErrMachineIDLost) {
			t.Errorf("Guard: err = %v; want ErrStoreUnavailable, not a lost ID", err)
		}
	})
}
