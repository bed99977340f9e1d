package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
)

// TestRideThroughRecorded: see the sqlstore test of the same name.
func TestRideThroughRecorded(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	e := newEnv(t, redisstore.Settings{RideThrough: time.Minute, Clock: clk})
	if e.store.Terms().RideThrough != time.Minute {
		t.Fatalf("RideThrough = %v", e.store.Terms().RideThrough)
	}
	_, err := redisstore.Open(t.Context(), e.client, with(testOptions(e.prefix), redisstore.Settings{Clock: clk}))
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "RideThrough 1s differs from the window 1m0s") {
		t.Fatalf("Open with the default window on a store recording 1m = %v; want ErrInvalidConfig naming both", err)
	}
	inst := machine.Instance{Namespace: "rt", ID: "pod-0", Stable: true}
	s0, err := e.store.Distribute(t.Context(), inst, 10, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stored := clk.Now().UnixMilli() + time.Minute.Milliseconds()
	s0.LastTimestamp = stored
	if err := e.store.Guard(t.Context(), inst, s0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond)
	if _, err := e.store.Distribute(t.Context(), inst, 10, 5*time.Minute); !errors.Is(err, engine.ErrInstanceInUse) {
		t.Fatalf("Distribute while the holder heartbeats = %v; want ErrInstanceInUse", err)
	}
	ad := redisstore.AdminOf(e.store)
	if _, err := ad.SetRideThrough(t.Context(), 5*time.Second, false); !errors.Is(err, engine.ErrInstanceInUse) {
		t.Fatalf("SetRideThrough with a live holder = %v; want ErrInstanceInUse", err)
	}
	clk.Advance(4 * time.Second) // killed: no heartbeat since
	s1, err := e.store.Distribute(t.Context(), inst, 10, 5*time.Minute)
	if err != nil || s1.MachineID != s0.MachineID || s1.LastTimestamp < stored {
		t.Fatalf("restart 4.5 s after the last heartbeat = %+v, %v; want machine ID %d with %d to wait out", s1, err, s0.MachineID, stored)
	}
	if old, err := ad.SetRideThrough(t.Context(), 5*time.Second, true); err != nil || old != time.Minute {
		t.Fatalf("SetRideThrough -force = %v, %v", old, err)
	}
	if _, err := redisstore.Open(t.Context(), e.client, with(testOptions(e.prefix), redisstore.Settings{Clock: clk, RideThrough: 5 * time.Second})); err != nil {
		t.Fatalf("Open with the rewritten window: %v", err)
	}
}
