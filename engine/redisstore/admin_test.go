package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
)

// Machines lists every ID of the namespace in order, with its instance,
// stability, holding and last timestamp, in one round trip.
func TestAdminMachines(t *testing.T) {
	s, fake, e := machineEnv(t)
	ctx := context.Background()
	web0 := machine.Instance{Namespace: "svc", ID: "web-0", Stable: true}
	live := distribute(t, s, web0, 10)
	gone := distribute(t, s, inst("web-1"), 10)
	if err := s.Revert(ctx, inst("web-1"), machine.State{MachineID: gone.MachineID, Holder: gone.Holder, LastTimestamp: 1}); err != nil {
		t.Fatal(err)
	}
	distribute(t, s, machine.Instance{Namespace: "other", ID: "x"}, 10)

	e.counter.take()
	as, err := redisstore.AdminOf(s).Machines(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	want := []machine.Assignment{
		{MachineID: live.MachineID, Instance: web0, Held: true, LastTimestamp: fake.Now().UnixMilli()},
		{MachineID: gone.MachineID, Instance: machine.Instance{Namespace: "svc"}, LastTimestamp: 1},
	}
	if !slices.Equal(as, want) {
		t.Fatalf("Machines(svc) = %+v, want %+v", as, want)
	}
	if got := e.counter.take(); len(got) != 1 {
		t.Errorf("Machines sent %v, want one script", got)
	}
	if as, err := redisstore.AdminOf(s).Machines(ctx, "none"); err != nil || len(as) != 0 {
		t.Fatalf("Machines of an unused namespace = %+v, %v; want none", as, err)
	}
}

// Release refuses a live holding unless forced, frees the ID keeping its
// last timestamp for the next holder, and the old holder finds it lost.
func TestAdminRelease(t *testing.T) {
	s, fake, e := machineEnv(t)
	ctx := context.Background()
	web0 := machine.Instance{Namespace: "svc", ID: "web-0", Stable: true}
	held := distribute(t, s, web0, 10)
	stamped := fake.Now().UnixMilli() + 60_000 // a reservation ahead of now
	held.LastTimestamp = stamped
	if err := s.Guard(ctx, web0, held); err != nil {
		t.Fatal(err)
	}

	e.counter.take()
	err := redisstore.AdminOf(s).Release(ctx, "svc", held.MachineID, false)
	if !errors.Is(err, engine.ErrInstanceInUse) || !strings.Contains(err.Error(), "-force") || !strings.Contains(err.Error(), "web-0") {
		t.Fatalf("release of a live holding: %v; want ErrInstanceInUse naming web-0 and -force", err)
	}
	if got := e.counter.take(); len(got) != 1 {
		t.Errorf("Release sent %v, want one script", got)
	}
	if err := s.Guard(ctx, web0, held); err != nil {
		t.Fatalf("a refused release changed the holding: %v", err)
	}
	if err := redisstore.AdminOf(s).Release(ctx, "svc", held.MachineID, true); err != nil {
		t.Fatalf("release -force: %v", err)
	}
	if err := s.Guard(ctx, web0, held); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("heartbeat after a forced release: %v; want ErrMachineIDLost", err)
	}
	as, err := redisstore.AdminOf(s).Machines(ctx, "svc")
	if err != nil || len(as) != 1 || as[0].Held || as[0].Instance.ID != "" || as[0].LastTimestamp != stamped {
		t.Fatalf("after the release Machines = %+v, %v; want the ID free at its last timestamp %d", as, err, stamped)
	}
	// The next holder waits out the released holder's last timestamp.
	fake.Advance(2 * time.Minute)
	next := distribute(t, s, inst("web-9"), 10)
	if next.MachineID != held.MachineID || next.LastTimestamp != stamped {
		t.Fatalf("next holder got %+v; want machine ID %d with last timestamp %d", next, held.MachineID, stamped)
	}

	if err := redisstore.AdminOf(s).Release(ctx, "svc", 7, true); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "never handed out") {
		t.Fatalf("release of an ID never handed out: %v; want ErrInvalidConfig", err)
	}
}

// A holding silent for longer than the live window is released without
// -force; a stable instance released so gets an ID again at its next start.
func TestAdminReleaseSilent(t *testing.T) {
	s, fake, _ := machineEnv(t)
	ctx := context.Background()
	web0 := machine.Instance{Namespace: "svc", ID: "web-0", Stable: true}
	first := distribute(t, s, web0, 10)
	fake.Advance(redisstore.DefaultResetGrace + time.Millisecond)
	if err := redisstore.AdminOf(s).Release(ctx, "svc", first.MachineID, false); err != nil {
		t.Fatalf("release of a silent holding: %v", err)
	}
	again := distribute(t, s, web0, 10)
	if again.MachineID != first.MachineID {
		t.Fatalf("web-0 restarted on machine ID %d, want the released %d", again.MachineID, first.MachineID)
	}
	if err := s.Guard(ctx, web0, first); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("the released holding still heartbeats: %v", err)
	}
}

// Counter reads a sequence; RaiseCounter raises it (creating it if missing)
// and never lowers it, and a process that fetched before carries on above
// the raise without seeing a reset.
func TestAdminCounter(t *testing.T) {
	e := newEnv(t, redisstore.Settings{Start: 100})
	s := e.store
	ctx := context.Background()
	if c, found, err := redisstore.AdminOf(s).Counter(ctx, "order"); err != nil || found || c != 0 {
		t.Fatalf("Counter of a missing sequence = %d, %t, %v; want not found", c, found, err)
	}
	if c, err := redisstore.AdminOf(s).RaiseCounter(ctx, "fresh", 5); err != nil || c != 100 {
		t.Fatalf("RaiseCounter of a missing sequence below Start = %d, %v; want 100", c, err)
	}
	seg := segmentOf(t, s, "order")
	first, err := seg.NextMaxID(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if c, found, err := redisstore.AdminOf(s).Counter(ctx, "order"); err != nil || !found || c != first {
		t.Fatalf("Counter = %d, %t, %v; want %d", c, found, err, first)
	}
	for _, to := range []int64{first + 1000, first, 1, -5} {
		if c, err := redisstore.AdminOf(s).RaiseCounter(ctx, "order", to); err != nil || c != first+1000 {
			t.Fatalf("RaiseCounter(%d) = %d, %v; want %d (never lowered)", to, c, err, first+1000)
		}
	}
	// Another process's store value, whose floor is below the raise.
	other, err := redisstore.Open(ctx, e.client, redisstore.Settings{Prefix: e.prefix, ResetGrace: -1, AllowVolatile: true})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := redisstore.AdminOf(other).RaiseCounter(ctx, "order", first+2000); err != nil || c != first+2000 {
		t.Fatalf("RaiseCounter from another store value = %d, %v", c, err)
	}
	if next, err := seg.NextMaxID(ctx, 10); err != nil || next != first+2010 {
		t.Fatalf("after the raise the next range ends at %d (%v), want %d", next, err, first+2010)
	}
}

// RaiseCounter runs under the epoch: on a store that forgot it, it changes
// nothing and reports the reset; the next raise works under the new epoch.
func TestAdminRaiseCounterAfterReset(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := redisstore.AdminOf(e.store).RaiseCounter(ctx, "order", 50); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Del(ctx, e.store.EpochKey()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisstore.AdminOf(e.store).RaiseCounter(ctx, "order", 70); !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("RaiseCounter on a reset store: %v; want ErrStoreReset", err)
	}
	if c, _, err := redisstore.AdminOf(e.store).Counter(ctx, "order"); err != nil || c != 50 {
		t.Fatalf("counter after a refused raise = %d, %v; want 50", c, err)
	}
	if c, err := redisstore.AdminOf(e.store).RaiseCounter(ctx, "order", 70); err != nil || c != 70 {
		t.Fatalf("RaiseCounter under the new epoch = %d, %v; want 70", c, err)
	}
}

// A Redis that cannot be reached fails every admin operation with
// engine.ErrStoreUnavailable.
func TestAdminStoreDown(t *testing.T) {
	s := downStore(t)
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["Machines"] = redisstore.AdminOf(s).Machines(ctx, "svc")
	errs["Release"] = redisstore.AdminOf(s).Release(ctx, "svc", 0, true)
	_, _, errs["Counter"] = redisstore.AdminOf(s).Counter(ctx, "order")
	_, errs["RaiseCounter"] = redisstore.AdminOf(s).RaiseCounter(ctx, "order", 5)
	for op, err := range errs {
		if !errors.Is(err, engine.ErrStoreUnavailable) {
			t.Errorf("%s on a store that is down: %v; want ErrStoreUnavailable", op, err)
		}
	}
}
