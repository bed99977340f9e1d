package sqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// TestRideThroughRecorded: the first Open records its window, the grace
// derives from it, a process with another window is refused naming both,
// and the operator's rewrite (refused while a holder is live, unless
// forced) lets the new window in.
func TestRideThroughRecorded(t *testing.T) {
	eachFreshDB(t, func(t *testing.T, d testdb.DB) {
		db := d.Open(t)
		clk := clocktest.NewFake(time.Now())
		st, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{CreateTables: true, Init: true, RideThrough: time.Minute, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if st.Terms().RideThrough != time.Minute || st.Terms().ResetGrace != time.Minute+time.Second {
			t.Fatalf("RideThrough, ResetGrace = %v, %v; want 1m, 1m1s", st.Terms().RideThrough, st.Terms().ResetGrace)
		}
		_, err = sqlstore.Open(t.Context(), db, sqlstore.Settings{ResetGrace: -1, Clock: clk})
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "RideThrough 1s differs from the window 1m0s") ||
			!strings.Contains(err.Error(), "idforge store ride-through") {
			t.Fatalf("Open with the default window on a store recording 1m = %v; want ErrInvalidConfig naming both", err)
		}
		// A stable instance holding a machine ID: its heartbeat stored now + 1m.
		inst := machine.Instance{Namespace: "rt", ID: "a", Stable: true}
		s0, err := st.Distribute(t.Context(), inst, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s0.LastTimestamp = clk.Now().UnixMilli() + time.Minute.Milliseconds()
		if err := st.Guard(t.Context(), inst, s0); err != nil {
			t.Fatal(err)
		}
		ad := sqlstore.AdminOf(st)
		if _, err := ad.SetRideThrough(t.Context(), 5*time.Second, false); !errors.Is(err, engine.ErrInstanceInUse) {
			t.Fatalf("SetRideThrough with a live holder = %v; want ErrInstanceInUse", err)
		}
		old, err := ad.SetRideThrough(t.Context(), 5*time.Second, true)
		if err != nil || old != time.Minute {
			t.Fatalf("SetRideThrough -force = %v, %v; want old 1m", old, err)
		}
		if _, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{RideThrough: 5 * time.Second, ResetGrace: -1, Clock: clk}); err != nil {
			t.Fatalf("Open with the rewritten window: %v", err)
		}
		if _, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{ResetGrace: -1, Clock: clk}); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Fatalf("Open with another window than the recorded one = %v; want it refused", err)
		}
		ad2, err := sqlstore.OpenAdmin(t.Context(), db, sqlstore.Settings{ResetGrace: -1, Clock: clk})
		if err != nil {
			t.Fatalf("OpenAdmin, which takes whatever window the store records: %v", err)
		}
		ad2.Close()
	})
}

// TestStableRestartWithLongWindow: a stable instance killed without
// reverting (its last heartbeat stored t + W, W = 60 s) gets its row back a
// few seconds later, not after W plus the grace, and must wait out the
// stored timestamp; while it heartbeats it is refused to a second process.
func TestStableRestartWithLongWindow(t *testing.T) {
	eachFreshDB(t, func(t *testing.T, d testdb.DB) {
		clk := clocktest.NewFake(time.Now())
		st := storeOn(t, d.Open(t), sqlstore.Settings{CreateTables: true, RideThrough: time.Minute, Clock: clk})
		inst := machine.Instance{Namespace: "rt", ID: "pod-0", Stable: true}
		s0, err := st.Distribute(t.Context(), inst, 10, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		stored := clk.Now().UnixMilli() + time.Minute.Milliseconds()
		s0.LastTimestamp = stored
		if err := st.Guard(t.Context(), inst, s0); err != nil {
			t.Fatal(err)
		}
		clk.Advance(500 * time.Millisecond)
		if _, err := st.Distribute(t.Context(), inst, 10, 5*time.Minute); !errors.Is(err, engine.ErrInstanceInUse) {
			t.Fatalf("Distribute while the holder heartbeats = %v; want ErrInstanceInUse", err)
		}
		clk.Advance(4 * time.Second) // killed: no heartbeat since
		s1, err := st.Distribute(t.Context(), inst, 10, 5*time.Minute)
		if err != nil {
			t.Fatalf("Distribute 4.5 s after the last heartbeat: %v", err)
		}
		if s1.MachineID != s0.MachineID || s1.LastTimestamp < stored {
			t.Fatalf("restart got %+v; want machine ID %d with the stored timestamp %d to wait out", s1, s0.MachineID, stored)
		}
	})
}

// eachFreshDB is forEachDB without the first Open, which would record the
// default window.
func eachFreshDB(t *testing.T, f func(t *testing.T, d testdb.DB)) {
	t.Helper()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}
