package integration

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/tests/faultproxy"
)

// TestStoreOutage cuts the connection to each networked store with a fault
// proxy: the segment chain and the machine-ID lease on the far side of it
// must ride the outage out and recover by themselves.
func TestStoreOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *server) {
		if s.target == "" {
			t.Skip("a local database file has no connection to cut")
		}
		t.Run("chain", func(t *testing.T) { chainOutage(t, s) })
		t.Run("lease", func(t *testing.T) { leaseOutage(t, s) })
	})
}

func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// hangGuard bounds how long a call honouring its ctx deadline may take
// before the test calls it hung. It is far above every deadline used.
const hangGuard = time.Minute

// nextID calls c.NextID with a ctx that times out after timeout, failing the
// test if the call does not return long after that.
func nextID(t *testing.T, c *chain.Chain, timeout time.Duration) (int64, error) {
	t.Helper()
	type result struct {
		id  int64
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		id, err := c.NextID(ctx)
		done <- result{id, err}
	}()
	select {
	case r := <-done:
		return r.id, r.err
	case <-time.After(hangGuard):
		t.Fatalf("NextID with a %v deadline has not returned after %v", timeout, hangGuard)
		return 0, nil
	}
}

// chainOutage: the chain serves exactly what it holds once the store is
// cut, fails cleanly when dry, comes back by itself after the restore and
// never repeats an ID, its own or another instance's.
func chainOutage(t *testing.T, s *server) {
	const (
		name         = "outage"
		step         = 100
		safeDistance = 4
	)
	p := startProxy(t, s.target)
	d, err := s.open(t, p.Addr()).Segment(name)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	// No MaxWait: only the caller's ctx can end a wait on a dry chain.
	c, err := ownedChain(d, segment.Settings{Step: step, SafeDistance: safeDistance, MaxWait: -1}, chain.Owned{Name: name, Logger: slog.New(logs), PrefetchPeriod: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	// Another instance, connected directly, draws from the sequence all along.
	stopOther := drawInBackground(t, s, name, step)

	var ids []int64
	draw := func(timeout time.Duration) error {
		t.Helper()
		id, err := nextID(t, c, timeout)
		if err != nil {
			return err
		}
		if n := len(ids); n > 0 && id <= ids[n-1] {
			t.Fatalf("ID %d after %d: not strictly increasing", id, ids[n-1])
		}
		ids = append(ids, id)
		return nil
	}
	if err := draw(hangGuard); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chain holds its safe distance", func() bool { return c.Stats().Ahead >= safeDistance*step })

	failures := c.Stats().Failures
	p.Cut()
	// Draw from what the chain holds until it is below its safe distance,
	// so the worker tops up and finds the store gone; keep the rest.
	for c.Stats().Failures == failures && c.Stats().Ahead >= safeDistance*step {
		if err := draw(hangGuard); err != nil {
			t.Fatalf("right after the cut, with IDs prefetched: %v", err)
		}
	}
	eventually(t, "the worker finds the store down", func() bool { return c.Stats().Failures > failures })
	held := c.Stats().Ahead
	if held <= 0 {
		t.Fatalf("the chain holds %d IDs when the worker finds the store down, want some", held)
	}
	var served int64
	for ; served <= held; served++ {
		if err = draw(200 * time.Millisecond); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatalf("served %d IDs with the store down, more than the %d the chain held", served, held)
	}
	if served != held {
		t.Errorf("served %d IDs from the %d the chain held when the store went down", served, held)
	}
	for _, target := range []error{engine.ErrSegmentExhausted, engine.ErrStoreUnavailable, context.DeadlineExceeded} {
		if !errors.Is(err, target) {
			t.Errorf("dry chain: %v; want it to match %v", err, target)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, "last store error") && !strings.Contains(msg, "refill failed") {
		t.Errorf("dry chain: %v; want the exhausted error to carry the store's failure", err)
	}
	if msg := err.Error(); !strings.Contains(msg, s.tag) || !strings.Contains(msg, name) {
		t.Errorf("dry chain: %q does not name the store (%q) and the sequence %q", msg, s.tag, name)
	}

	p.Restore()
	attempts := 1
	for ; ; attempts++ {
		err := draw(time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, engine.ErrSegmentExhausted) {
			t.Fatalf("recovering, attempt %d: %v; want ErrSegmentExhausted until IDs flow", attempts, err)
		}
		if attempts == 60 {
			t.Fatalf("no ID after %d one-second attempts since the restore: %v", attempts, err)
		}
	}
	for range 10 * step {
		if err := draw(hangGuard); err != nil {
			t.Fatalf("after the recovery: %v", err)
		}
	}
	if st := c.Stats(); st.LastError != nil {
		t.Errorf("Stats().LastError = %v after the recovery, want nil", st.LastError)
	}
	// One line when the outage starts and one when it ends, however many
	// retries it took (and a summary per 10 s, if it lasted that long).
	if logs.count("store failed") != 1 || logs.count("store answered again") != 1 {
		t.Errorf("the chain did not log the outage and the recovery once each: %q", logs.msgs)
	}
	all := append(stopOther(), ids...)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice across the two instances", all[i])
		}
	}
	t.Logf("served %d IDs after the cut (%d held when the store failed), dry with %v; IDs again at attempt %d after the restore; %d IDs from this instance, %d from the other",
		step+served, held, err, attempts, len(ids), len(all)-len(ids))
}

// drawInBackground starts a chain on a connection of its own that draws one
// ID per millisecond from the sequence name until the returned function is
// called; that function returns the IDs it drew, checked to increase.
func drawInBackground(t *testing.T, s *server, name string, step int64) func() []int64 {
	t.Helper()
	d, err := s.open(t, "").Segment(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ownedChain(d, segment.Settings{Step: step}, chain.Owned{Name: name, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var (
		ids  []int64
		err2 error
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			id, err := c.NextID(ctx)
			if err != nil {
				err2 = err
				return
			}
			if n := len(ids); n > 0 && id <= ids[n-1] {
				err2 = errors.New("IDs not strictly increasing")
				return
			}
			ids = append(ids, id)
		}
	})
	return func() []int64 {
		close(stop)
		wg.Wait()
		if err2 != nil {
			t.Errorf("the directly connected instance: %v", err2)
		}
		return ids
	}
}

// leaseOutage: a machine-ID lease whose heartbeats fail stays valid within
// its window, refuses past it without giving the ID up, and is confirmed
// again once the store is back. A fake clock stands for the passing time, so
// the window is exact however slow the machine.
func leaseOutage(t *testing.T, s *server) {
	// The default reservation, 4 × heartbeat = 1.6 s, is the window: it
	// must stay below the stores' 2 s reset grace, or Acquire refuses.
	const (
		safeGuard = 10 * time.Minute
		heartbeat = 400 * time.Millisecond
	)
	ctx := context.Background()
	p := startProxy(t, s.target)
	dist := s.open(t, p.Addr())
	fc := clocktest.NewFake(time.Now())
	fc.ManualSleep = true
	logs := &logRecorder{}
	inst := machine.Instance{Namespace: "outage", ID: "leaseholder"}
	l, err := leased.Acquire(ctx, dist, inst, leased.LeaseSettings{Clock: fc, SafeGuard: safeGuard, Heartbeat: heartbeat, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	held := func() {
		t.Helper()
		if id, ok := s.holder(t, inst.Namespace, inst.ID); !ok || id != l.MachineID() {
			t.Fatalf("the store says %s holds machine ID %d (%v), the lease has %d", inst.Namespace+"/"+inst.ID, id, ok, l.MachineID())
		}
	}
	held()
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat with the store up: %v", err)
	}

	p.Cut()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = l.Heartbeat(hctx)
	cancel()
	if !errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("heartbeat with the store cut: %v; want ErrStoreUnavailable, not ErrMachineIDLost", err)
	}
	fc.Advance(heartbeat) // the lease's own heartbeat is due
	eventually(t, "the background heartbeat fails", func() bool { return logs.count("heartbeat failed") > 0 })
	if err := l.Check(fc.Now().UnixMilli()); err != nil || l.Err() != nil {
		t.Fatalf("%v after the last confirmation, within the reservation %v: Check = %v, Err = %v; want the lease valid",
			heartbeat, l.Reservation(), err, l.Err())
	}
	fc.Advance(safeGuard) // past the window: someone may have reclaimed the ID
	if err := l.Check(fc.Now().UnixMilli()); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("past the reservation and the safe-guard without a heartbeat: Check = %v; want ErrMachineIDLost", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("a lapsed lease ended: Err = %v; want nil, it may still be confirmed", err)
	}

	p.Restore()
	// The lease retries every quarter interval; move its clock until it does.
	eventually(t, "the background heartbeat recovers", func() bool {
		if logs.count("heartbeat recovered") > 0 {
			return true
		}
		fc.Advance(heartbeat / 4)
		return false
	})
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat after the restore: %v", err)
	}
	if err := l.Check(fc.Now().UnixMilli()); err != nil || l.Err() != nil {
		t.Fatalf("after the restore: Check = %v, Err = %v; want the lease valid again", err, l.Err())
	}
	held()
	if logs.count("heartbeat failed") != 1 || logs.count("heartbeat recovered") != 1 {
		t.Errorf("the lease did not log the outage and the recovery once each: %q", logs.msgs)
	}
	t.Logf("machine ID %d: lease valid again after the restore; logged %q", l.MachineID(), logs.msgs)
}
