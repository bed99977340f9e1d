// Package leasetest runs a machine.Distributor under the registry's lease
// (internal/leased), as a process does at start-up: what the distributor's
// contract (engine/machine/machinetest) cannot show alone. The tests of
// idforge's stores run it beside machinetest.Run.
package leasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/leased"
)

// safeGuard is the cases' safe-guard duration; the fake clock makes its
// length irrelevant to the run time.
const safeGuard = time.Minute

// start is where every case's fake clock begins.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// nonce makes namespaces unique across runs and cases, so a store may be
// shared between cases and between runs without cleaning it.
var nonce atomic.Int64

// Run checks the distributor newDistributor builds under leased.Acquire:
// two processes with one stable instance ID, where the second is refused
// naming the instance and the first, cut off until another took the ID
// over, ends at its next heartbeat and logs both holders
// (StableLeaseTakenOver); and, where the distributor has a server clock (its
// ServerTime is not the zero time), Acquire refuses a clock
// further from it than the skew margin, warns beyond half of it and accepts
// one within (ServerClockSkew). newDistributor is called once per case with
// a fresh clocktest.Fake, which the distributor must read "now" from and
// must not sleep on (the cases set ManualSleep).
func Run(t *testing.T, newDistributor func(t *testing.T, c clock.Clock) machine.Distributor) {
	t.Helper()
	nonce.CompareAndSwap(0, time.Now().UnixNano())
	for _, c := range []struct {
		name string
		run  func(*env)
	}{
		{"StableLeaseTakenOver", testStableLease},
		{"ServerClockSkew", testServerClock},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			e := &env{t: t, clk: clk, ns: fmt.Sprintf("lt-%s-%d", c.name, nonce.Add(1))}
			e.d = newDistributor(t, clk)
			if e.d == nil {
				t.Fatal("newDistributor returned nil")
			}
			c.run(e)
		})
	}
}

type env struct {
	t   *testing.T
	clk *clocktest.Fake
	d   machine.Distributor
	ns  string
}

func (e *env) inst(id string) machine.Instance {
	return machine.Instance{Namespace: e.ns, ID: id}
}

func (e *env) now() int64 { return e.clk.Now().UnixMilli() }

// testStableLease: two processes with one stable instance ID. The second
// is refused at Acquire; once the first is cut off from the store for the
// safe-guard, the second takes the ID over, and the first's next heartbeat
// finds another holder: its lease ends (Err, Lost and Check refuse) and its
// log names both holders. One distributor value stands for the store both
// processes reach: the store refuses before the lease's process-wide guard
// looks, and that guard gives way to a lease that lapsed.
func testStableLease(e *env) {
	e.clk.ManualSleep = true // the heartbeat goroutines wait for the test
	var logs lockedBuffer
	s := machine.Instance{Namespace: e.ns, ID: "pod-0", Stable: true}
	// The wrappers also hide the store's server clock, which the fake clock
	// is nowhere near.
	first, second := &cutOff{Distributor: e.d}, &cutOff{Distributor: e.d}
	opts := leased.LeaseSettings{Clock: e.clk, SafeGuard: safeGuard, MachineBits: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := e.t.Context()
	a, err := leased.Acquire(ctx, first, s, opts)
	if err != nil {
		e.t.Fatalf("first Acquire: %v", err)
	}
	defer a.Close()

	b, err := leased.Acquire(ctx, second, s, opts)
	if err == nil {
		b.Close()
	}
	if !errors.Is(err, engine.ErrInstanceInUse) || !strings.Contains(err.Error(), s.ID) || !strings.Contains(err.Error(), "another live process") {
		e.t.Fatalf("second Acquire while the first is live = %v; want ErrInstanceInUse naming %q and what to do", err, s.ID)
	}

	// The first is cut off past its reservation plus the safe-guard: it
	// looks dead, and the second gets the ID.
	first.cut.Store(true)
	e.clk.Advance(safeGuard + time.Minute)
	b, err = leased.Acquire(ctx, second, s, opts)
	if err != nil {
		e.t.Fatalf("second Acquire once the first was silent for the safe-guard: %v", err)
	}
	defer b.Close()
	if b.MachineID() != a.MachineID() {
		e.t.Fatalf("the second got machine ID %d, want the instance's %d", b.MachineID(), a.MachineID())
	}

	first.cut.Store(false)
	err = a.Heartbeat(ctx)
	if !errors.Is(err, engine.ErrMachineIDLost) || !errors.Is(a.Err(), engine.ErrMachineIDLost) {
		e.t.Fatalf("the first's heartbeat after the takeover = %v, Err = %v; want ErrMachineIDLost", err, a.Err())
	}
	select {
	case <-a.Lost():
	default:
		e.t.Fatal("the first's Lost channel is open after the takeover")
	}
	if err := a.Check(e.now()); !errors.Is(err, engine.ErrMachineIDLost) {
		e.t.Fatalf("the first's Check after the takeover = %v; want ErrMachineIDLost", err)
	}
	ours, theirs := a.State().Holder, b.State().Holder
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, ours.String()) || !strings.Contains(out, theirs.String()) {
		e.t.Errorf("the first's log does not name both holders (%s, %s):\n%s", ours, theirs, out)
	}
	if strings.Contains(out, string(ours)) || strings.Contains(out, string(theirs)) {
		e.t.Errorf("the log shows a holder secret:\n%s", out)
	}
	if err := b.Heartbeat(ctx); err != nil {
		e.t.Fatalf("the second's heartbeat: %v", err)
	}
}

// testServerClock: a distributor with a server clock has Acquire refuse a
// lease clock further from it than the skew margin (a fifth of the
// safe-guard by default), either way, warn beyond half the margin and
// accept a clock within. The offsets keep minutes from the thresholds, so
// the time the calls take does not matter.
func testServerClock(e *env) {
	ctx := e.t.Context()
	if now, err := e.d.ServerTime(ctx); err != nil || now.IsZero() {
		if err != nil {
			e.t.Fatalf("ServerTime: %v", err)
		}
		e.t.Skip("the distributor has no server clock (its ServerTime is the zero time)")
	}
	const sg = time.Hour // the skew margin is 12 minutes
	for i, tc := range []struct {
		offset       time.Duration
		refuse, warn bool
	}{
		{30 * time.Minute, true, false},
		{-30 * time.Minute, true, false},
		{9 * time.Minute, false, true},
		{-9 * time.Minute, false, true},
		{time.Minute, false, false},
		{-time.Minute, false, false},
	} {
		server, err := e.d.ServerTime(ctx)
		if err != nil {
			e.t.Fatalf("ServerTime: %v", err)
		}
		clk := clocktest.NewFake(server.Add(tc.offset))
		clk.ManualSleep = true
		var logs lockedBuffer
		l, err := leased.Acquire(ctx, e.d, e.inst(fmt.Sprintf("skew%d", i)), leased.LeaseSettings{Clock: clk, SafeGuard: sg, MachineBits: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if l != nil {
			l.Close()
		}
		way := "ahead of"
		if tc.offset < 0 {
			way = "behind"
		}
		switch {
		case tc.refuse:
			if !errors.Is(err, engine.ErrClockSkew) || !strings.Contains(err.Error(), way+" the store's server clock") ||
				!strings.Contains(err.Error(), "skew margin 12m0s") {
				e.t.Errorf("a clock %v off the server's: Acquire = %v; want ErrClockSkew saying it is %s it, beyond the skew margin 12m0s", tc.offset, err, way)
			}
		case err != nil:
			e.t.Errorf("a clock %v off the server's: Acquire = %v; want it accepted", tc.offset, err)
		case strings.Contains(logs.String(), "level=WARN") != tc.warn:
			e.t.Errorf("a clock %v off the server's, skew margin 12m0s: warned %v, want %v; log:\n%s", tc.offset, !tc.warn, tc.warn, logs.String())
		}
	}
}

// cutOff stands between a lease and its store: while cut, Guard fails as
// for a store out of reach. It hides the store's server clock and its
// terms but for the last timestamps it keeps.
type cutOff struct {
	machine.Distributor
	cut atomic.Bool
}

// Terms are a store's that keeps last timestamps, with no window and no
// grace.
func (c *cutOff) Terms() machine.Terms { return machine.Terms{Remembers: true} }

// ServerTime is the zero time: no clock to compare.
func (c *cutOff) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

func (c *cutOff) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if c.cut.Load() {
		return fmt.Errorf("%w: leasetest: cut off from the store", engine.ErrStoreUnavailable)
	}
	return c.Distributor.Guard(ctx, inst, st)
}

// lockedBuffer is a log sink the heartbeat goroutine may write to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
