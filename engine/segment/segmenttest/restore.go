package segmenttest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/segcheck"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// checkRestore checks the Restore part of [Run] (see there).
func checkRestore(t *testing.T, s Suite) {
	open := s.Open
	ctx := testContext(t)
	var mu sync.Mutex
	data := map[string]int64{} // MAX(id) of each sequence's table; none: no Floor knows it
	floor := func(_ context.Context, name string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		n, ok := data[name]
		if !ok {
			return 0, engine.ErrNoFloor
		}
		return n, nil
	}
	write := func(name string, maxID int64) {
		mu.Lock()
		defer mu.Unlock()
		data[name] = maxID
	}
	forget := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		delete(data, name)
	}
	declare := func(t *testing.T) {
		t.Helper()
		if err := s.Admin(t).Restored(ctx); err != nil {
			t.Fatalf("declaring the store restored: %v", err)
		}
	}
	refused := func(d segment.Distributor, what string) {
		t.Helper()
		got, err := d.NextMaxID(ctx, 100)
		for i := 0; i < 3 && errors.Is(err, engine.ErrStoreReset); i++ {
			got, err = d.NextMaxID(ctx, 100)
		}
		if !errors.Is(err, engine.ErrNoFloor) || !strings.Contains(err.Error(), "older than what was handed out") {
			t.Fatalf("%s: (%d, %d], %v; want engine.ErrNoFloor saying the counter may be older than what was handed out", what, got-100, got, err)
		}
	}

	// Declared: no process of the old state is left.
	write("orders", 0)
	write("bare", 0)
	a := open(t, floor)
	orders, bare := a("orders"), a("bare")
	expect(t, ctx, orders, 100, 100)
	expect(t, ctx, bare, 100, 100)
	restore := s.Snapshot(t)
	expect(t, ctx, orders, 100, 200)
	expect(t, ctx, orders, 100, 300)
	expect(t, ctx, bare, 100, 200)
	write("orders", 250) // rows up to 250 written; a then stops
	forget("bare")       // and no Floor knows bare's table
	restore(t)
	declare(t)
	b := open(t, floor)
	segcheck.ExpectAbove(t, b("orders"), 100, 250, "after Declare, a sequence whose Floor says 250")
	refused(b("bare"), "after Declare, a sequence no Floor knows")
	if _, err := s.Admin(t).RaiseCounter(ctx, "bare", 5_000); err != nil {
		t.Fatalf("an operator's raise: %v", err)
	}
	segcheck.ExpectAbove(t, b("bare"), 100, 5_000, "after Declare and an operator's raise to 5,000")

	// The restored counter is a lower bound: a Floor answering less (rows
	// not written yet) does not take the counter down.
	write("ahead", 0)
	c := open(t, floor)
	ahead := c("ahead")
	expect(t, ctx, ahead, 100, 100)
	expect(t, ctx, ahead, 100, 200)
	write("ahead", 10)
	declare(t)
	segcheck.ExpectAbove(t, open(t, floor)("ahead"), 100, 200, "after Declare, a counter at 200 whose Floor says 10")

	// A live store value across Declare.
	write("live", 0)
	live := open(t, floor)("live")
	expect(t, ctx, live, 100, 100)
	declare(t)
	if _, err := live.NextMaxID(ctx, 100); !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("a live store value's fetch after Declare: %v; want engine.ErrStoreReset", err)
	}
	segcheck.ExpectAbove(t, live, 100, 100, "a live store value after Declare")

	// The epoch deleted, the counters kept.
	write("kept", 0)
	write("kept-ahead", 0)
	d := open(t, floor)
	expect(t, ctx, d("kept"), 100, 100)
	keptAhead := d("kept-ahead")
	expect(t, ctx, keptAhead, 100, 100)
	expect(t, ctx, keptAhead, 100, 200)
	write("warm", 0)
	e := open(t, floor) // opened before the drop: it finds the epoch gone at its next fetch
	expect(t, ctx, e("warm"), 100, 100)
	forget("kept")
	write("kept-ahead", 10)
	s.Wipe(t, true)
	refused(e("kept"), "after the epoch was deleted, a sequence no Floor knows")
	segcheck.ExpectAbove(t, e("kept-ahead"), 100, 200, "after the epoch was deleted, a counter at 200 whose Floor says 10")

	// Restored with its epoch under a live store value.
	write("seen", 0)
	write("gone", 0)
	seer, goner := open(t, floor)("seen"), open(t, floor)("gone")
	expect(t, ctx, seer, 100, 100)
	expect(t, ctx, goner, 100, 100)
	restore = s.Snapshot(t)
	expect(t, ctx, seer, 100, 200)
	expect(t, ctx, goner, 100, 200)
	expect(t, ctx, goner, 100, 300)
	forget("gone") // its process stops; no Floor knows its table
	restore(t)
	if _, err := seer.NextMaxID(ctx, 100); !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("a live store value whose counter went back from 200 to 100: %v; want engine.ErrStoreReset", err)
	}
	segcheck.ExpectAbove(t, seer, 100, 200, "the live store value after it saw the store go back")
	refused(open(t, floor)("gone"), "a sequence used after the snapshot by a process now gone, once a live one saw the store go back")

	// Restored with its epoch under a live machine-ID holder that claimed
	// its ID after the snapshot.
	write("late", 0)
	lateSeg := open(t, floor)("late")
	expect(t, ctx, lateSeg, 100, 100)
	m := s.Machines(t)
	restore = s.Snapshot(t)
	inst := machine.Instance{Namespace: "restore-suite", ID: "late"}
	st, err := m.Distribute(ctx, inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ctx, lateSeg, 100, 200)
	forget("late")
	restore(t)
	if err := m.Guard(ctx, inst, st); !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), "gone from the store") {
		t.Fatalf("a heartbeat whose machine ID, claimed after the snapshot, is gone: %v; want engine.ErrStoreReset saying the ID is gone from the store", err)
	}
	refused(open(t, floor)("late"), "a sequence used after the snapshot by a process now gone, once a heartbeat found its machine ID gone")
}
