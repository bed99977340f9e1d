package leased_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/internal/leased"
)

// The snowflake generator's Fence, restated: Lease must satisfy it.
var _ interface{ Check(unixMilli int64) error } = (*leased.Lease)(nil)

var discard = slog.New(slog.DiscardHandler)

// testClock is a manual clock whose Sleep records the wake-up time under the
// same lock that Advance takes, so a test can move the clock exactly to the
// heartbeat goroutine's next wake-up without racing it.
type testClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	sleeps int       // Sleep calls so far
	asleep int       // Sleep calls in progress
	wake   time.Time // wake-up time of the latest Sleep
}

func newTestClock() *testClock {
	c := &testClock{now: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) ms() int64 { return c.Now().UnixMilli() }

func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps++
	c.asleep++
	defer func() { c.asleep-- }()
	c.wake = c.now.Add(d)
	for c.now.Before(c.wake) {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.cond.Wait()
	}
	return nil
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.cond.Broadcast()
	c.mu.Unlock()
}

func (c *testClock) state() (sleeps, asleep int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps, c.asleep
}

// waitAsleep waits until the heartbeat goroutine sleeps on the clock.
func (c *testClock) waitAsleep(t *testing.T) {
	t.Helper()
	eventually(t, "heartbeat goroutine asleep", func() bool { _, a := c.state(); return a > 0 })
}

// beat moves the clock to the heartbeat goroutine's wake-up time and waits
// until that heartbeat is over and the goroutine sleeps again.
func (c *testClock) beat(t *testing.T) {
	t.Helper()
	c.waitAsleep(t)
	c.mu.Lock()
	n := c.sleeps
	c.now = c.wake
	c.cond.Broadcast()
	c.mu.Unlock()
	eventually(t, "heartbeat done", func() bool { s, a := c.state(); return s > n && a > 0 })
}

// eventually polls cond until it holds; a generous deadline turns a hang into
// a failure. Nothing here measures how long it took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// probe wraps a distributor to count calls, fail Guard while down, and hold
// Guard calls until gate is closed (a heartbeat that has not completed).
type probe struct {
	machine.Distributor
	gate     chan struct{}
	down     atomic.Bool
	entered  atomic.Int64 // Guard calls started
	guards   atomic.Int64 // successful Guards
	lastTS   atomic.Int64 // timestamp of the last successful Guard
	reverts  atomic.Int64
	revertTS atomic.Int64
}

func (p *probe) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	p.entered.Add(1)
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.down.Load() {
		return fmt.Errorf("%w: probe: store down", engine.ErrStoreUnavailable)
	}
	err := p.Distributor.Guard(ctx, inst, st)
	if err == nil {
		p.lastTS.Store(st.LastTimestamp)
		p.guards.Add(1)
	}
	return err
}

func (p *probe) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	p.reverts.Add(1)
	p.revertTS.Store(st.LastTimestamp)
	return p.Distributor.Revert(ctx, inst, st)
}

const (
	minute = int64(time.Minute / time.Millisecond)
	second = int64(time.Second / time.Millisecond)
)

// acquire leases with s, whose zero fields default to a quiet lease with a
// one-minute heartbeat and no reservation.
func acquire(t *testing.T, d machine.Distributor, inst machine.Instance, s leased.LeaseSettings) *leased.Lease {
	t.Helper()
	if s.Logger == nil {
		s.Logger = discard
	}
	if s.Lease.Heartbeat == 0 {
		s.Lease.Heartbeat = time.Minute
	}
	if s.Reservation == 0 {
		s.Reservation = -1
	}
	l, err := leased.Acquire(t.Context(), d, inst, s)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func wantLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("%s = %v, want an error wrapping ErrMachineIDLost", what, err)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var instA = machine.Instance{Namespace: "orders", ID: "a"}

func TestLeaseHeartbeats(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk)}
	t0 := clk.ms()
	var source atomic.Int64
	source.Store(t0 + 90*second) // the generator used a timestamp ahead of the clock
	l := acquire(t, p, instA, leased.LeaseSettings{Clock: clk, TimestampSource: source.Load})

	if err := l.Check(t0 + 4*minute - 1); err != nil {
		t.Fatalf("Check within the first window: %v", err)
	}
	clk.beat(t) // at t0+1m
	if got, want := p.lastTS.Load(), t0+90*second; p.guards.Load() != 1 || got != want {
		t.Fatalf("after 1 heartbeat: %d guards, last timestamp %d; want 1, %d (the source, ahead of the clock)", p.guards.Load(), got, want)
	}
	clk.beat(t) // at t0+2m
	if got, want := p.lastTS.Load(), t0+2*minute; p.guards.Load() != 2 || got != want {
		t.Fatalf("after 2 heartbeats: %d guards, last timestamp %d; want 2, %d (the clock)", p.guards.Load(), got, want)
	}
	// The heartbeat at t0+2m confirms the lease until t0+2m+5m-1m.
	if err := l.Check(t0 + 6*minute - 1); err != nil {
		t.Fatalf("Check inside the renewed window: %v", err)
	}
	wantLost(t, l.Check(t0+6*minute), "Check at the end of the renewed window")
	if l.Err() != nil || isClosed(l.Lost()) {
		t.Fatalf("a lapsed lease reported as ended: Err=%v", l.Err())
	}
}

func TestLeaseStallRecoversWhenNotReclaimed(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk), gate: make(chan struct{})}
	t0 := clk.ms()
	l := acquire(t, p, instA, leased.LeaseSettings{Clock: clk})

	clk.waitAsleep(t)
	clk.Advance(6 * time.Minute) // the process was frozen past the safe-guard
	eventually(t, "heartbeat started", func() bool { return p.entered.Load() == 1 })
	// The heartbeat has not completed: Check must already refuse.
	now := clk.ms()
	err := l.Check(now)
	wantLost(t, err, "Check after a stall, before any heartbeat")
	t.Logf("refusal: %v", err)
	if err := l.Check(t0 + 4*minute - 1); err != nil {
		t.Fatalf("Check of a timestamp inside the window: %v", err)
	}

	close(p.gate) // the heartbeat goes through: nobody took the ID
	eventually(t, "lease revalidated", func() bool { return l.Check(now) == nil })
	if p.guards.Load() != 1 || l.Err() != nil {
		t.Fatalf("after recovery: %d guards, Err %v; want 1, nil", p.guards.Load(), l.Err())
	}
	// Confirmed at now: valid until now+4m.
	wantLost(t, l.Check(now+4*minute), "Check past the renewed window")
}

func TestLeaseStallReclaimedEndsLease(t *testing.T) {
	clk := newTestClock()
	mem := machinetest.NewMemory(clk)
	p := &probe{Distributor: mem, gate: make(chan struct{})}
	ctx := t.Context()
	const bits = 1
	filler := machine.Instance{Namespace: "orders", ID: "filler"}
	fst, err := mem.Distribute(ctx, filler, bits, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.ms()
	l := acquire(t, p, instA, leased.LeaseSettings{Clock: clk, MachineBits: bits})

	clk.waitAsleep(t)
	clk.Advance(6 * time.Minute)
	eventually(t, "heartbeat started", func() bool { return p.entered.Load() == 1 })
	wantLost(t, l.Check(clk.ms()), "Check after a stall")

	// Meanwhile another instance reclaims the silent instance's ID.
	fst.LastTimestamp = clk.ms()
	if err := mem.Guard(ctx, filler, fst); err != nil {
		t.Fatal(err)
	}
	b := machine.Instance{Namespace: "orders", ID: "b"}
	bst, err := mem.Distribute(ctx, b, bits, leased.DefaultSafeGuard)
	if err != nil || bst.MachineID != l.MachineID() {
		t.Fatalf("b got %+v, %v; want a's machine ID %d", bst, err, l.MachineID())
	}

	close(p.gate) // the stalled heartbeat completes and finds the ID gone
	select {
	case <-l.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("lease not ended after its ID was taken over")
	}
	wantLost(t, l.Err(), "Err")
	for _, ts := range []int64{t0, t0 + minute, clk.ms()} {
		wantLost(t, l.Check(ts), fmt.Sprintf("Check(%d) after takeover", ts))
	}
	entered := p.entered.Load()
	wantLost(t, l.Heartbeat(ctx), "Heartbeat after takeover")
	if p.entered.Load() != entered {
		t.Error("Heartbeat of an ended lease called the distributor")
	}
	if err := l.Close(); err != nil || p.reverts.Load() != 0 {
		t.Fatalf("Close after takeover = %v with %d reverts; want nil, 0", err, p.reverts.Load())
	}
	if err := mem.Guard(ctx, b, bst); err != nil {
		t.Fatalf("b lost its machine ID after a's Close: %v", err)
	}
}

func TestLeaseTransientErrors(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk)}
	p.down.Store(true)
	t0 := clk.ms()
	l := acquire(t, p, instA, leased.LeaseSettings{Clock: clk})

	if err := l.Heartbeat(t.Context()); !errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("Heartbeat with the store down = %v; want ErrStoreUnavailable only", err)
	}
	for clk.ms() < t0+4*minute+30*second {
		clk.beat(t)
		if now := clk.ms(); now < t0+4*minute {
			if err := l.Check(now); err != nil {
				t.Fatalf("Check at t0+%v while the store is down: %v", time.Duration(now-t0)*time.Millisecond, err)
			}
		}
	}
	// Failed heartbeats retry every quarter interval.
	if s, _ := clk.state(); s < 10 {
		t.Errorf("%d heartbeat sleeps in 4.5 minutes of failures; want retries every 15s", s)
	}
	wantLost(t, l.Check(clk.ms()), "Check after the store was down past the window")
	if l.Err() != nil || isClosed(l.Lost()) {
		t.Fatalf("store outage ended the lease: %v", l.Err())
	}

	p.down.Store(false)
	clk.beat(t)
	now := clk.ms()
	if err := l.Check(now); err != nil {
		t.Fatalf("Check after the store came back: %v", err)
	}
	if err := l.Check(now + 4*minute - 1); err != nil {
		t.Fatalf("Check inside the renewed window: %v", err)
	}
}

// logCounter is a slog.Handler counting records by level and message.
type logCounter struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCounter) WithGroup(string) slog.Handler            { return c }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	return nil
}

// lines returns "LEVEL message" of every record so far, and forgets them.
func (c *logCounter) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.recs {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	c.recs = nil
	return out
}

// A store outage is logged once when it starts, summarised at most every
// 10 s, and once with its length when it ends, however often the heartbeat
// retries (every 62.5 ms here); meanwhile Check's refusals say that the
// store cannot be reached, not that the machine ID was lost.
func TestLeaseOutageLogging(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk)}
	logs := &logCounter{}
	l := acquire(t, p, instA, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: 250 * time.Millisecond}, Clock: clk, Reservation: time.Second, Logger: slog.New(logs)})
	logs.lines() // the acquisition's

	p.down.Store(true)
	outage := func(d time.Duration) {
		t.Helper()
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			clk.beat(t)
		}
	}
	began := clk.Now()
	outage(6 * time.Second)
	const (
		failed    = "WARN idforge: machine ID heartbeat failed; IDs are refused from valid_until on unless one succeeds"
		still     = "WARN idforge: machine ID heartbeats still failing"
		recovered = "INFO idforge: machine ID heartbeat recovered"
	)
	if got := logs.lines(); len(got) != 1 || got[0] != failed {
		t.Fatalf("6 s of failed heartbeats logged %q; want one %q", got, failed)
	}
	err := l.Check(clk.ms())
	if !errors.Is(err, engine.ErrMachineIDLost) || !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("Check with the store away past the reservation = %v; want ErrMachineIDLost and ErrStoreUnavailable", err)
	}
	msg := err.Error()
	for _, want := range []string{"the store has not answered the heartbeats", "since " + began.UTC().Format("2006-01-02T15:04:05"),
		"another instance may have taken the ID", "probe: store down"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, engine.ErrMachineIDLost.Error()) {
		t.Errorf("the refusal %q claims the machine ID was lost", msg)
	}

	outage(29 * time.Second) // 35 s in all: summaries at 10, 20 and 30 s
	if got := logs.lines(); len(got) != 3 || got[0] != still || got[2] != still {
		t.Fatalf("35 s of failed heartbeats logged, after the first line, %q; want 3 × %q", got, still)
	}
	p.down.Store(false)
	clk.beat(t)
	logs.mu.Lock()
	var length time.Duration
	if len(logs.recs) == 1 {
		logs.recs[0].Attrs(func(a slog.Attr) bool {
			if a.Key == "outage" {
				length = a.Value.Duration()
			}
			return true
		})
	}
	logs.mu.Unlock()
	if got := logs.lines(); len(got) != 1 || got[0] != recovered {
		t.Fatalf("the recovery logged %q; want one %q", got, recovered)
	}
	if want := (clk.Now().Sub(began) - 250*time.Millisecond).Round(time.Millisecond); length != want {
		t.Errorf("the recovery says the outage lasted %v; want %v (from the first failed heartbeat)", length, want)
	}
	if err := l.Check(clk.ms()); err != nil {
		t.Fatalf("Check after the recovery: %v", err)
	}

	// A lapse without a failed heartbeat (a stalled process) says nothing
	// of the store. The process wakes 2 s on and its generator checks a
	// timestamp of then before its heartbeat goroutine runs: the clock is
	// left alone, since advancing it would wake that goroutine, whose
	// heartbeat (the store is back) could renew the lease first.
	if err := l.Check(clk.ms() + 2*second); !errors.Is(err, engine.ErrMachineIDLost) || errors.Is(err, engine.ErrStoreUnavailable) ||
		strings.Contains(err.Error(), "not answered") {
		t.Errorf("Check past the reservation without a failed heartbeat = %v; want a lapse that does not blame the store", err)
	}
}

// After a restart behind the clock the first heartbeat, sent before the
// generator issued anything, must not store a timestamp older than the one
// the lease was distributed with.
func TestLeaseHeartbeatNeverGoesBack(t *testing.T) {
	clk := newTestClock()
	mem := machinetest.NewMemory(clk)
	x := machine.Instance{Namespace: "orders", ID: "x", Stable: true} // restarts on its own ID
	st, err := mem.Distribute(t.Context(), x, leased.DefaultMachineBits, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	ahead := clk.ms() + 10*minute
	st.LastTimestamp = ahead
	if err := mem.Revert(t.Context(), x, st); err != nil {
		t.Fatal(err)
	}
	p := &probe{Distributor: mem}
	l := acquire(t, p, x, leased.LeaseSettings{Clock: clk, TimestampSource: func() int64 { return 0 }})
	if l.State().LastTimestamp != ahead {
		t.Fatalf("distributed %+v, want LastTimestamp %d", l.State(), ahead)
	}
	if err := l.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.lastTS.Load(); got != ahead {
		t.Fatalf("heartbeat sent LastTimestamp %d, want the distributed %d, not the clock %d", got, ahead, clk.ms())
	}
}

func TestLeaseCloseRevertsAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	clk := newTestClock()
	mem := machinetest.NewMemory(clk)
	p := &probe{Distributor: mem}
	t0 := clk.ms()
	l, err := leased.Acquire(t.Context(), p, instA, leased.LeaseSettings{Clock: clk, Logger: discard, Reservation: -1, TimestampSource: func() int64 { return t0 + 10*second }})
	if err != nil {
		t.Fatal(err)
	}
	clk.waitAsleep(t)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if p.reverts.Load() != 1 || p.revertTS.Load() != t0+10*second {
		t.Fatalf("Close reverted %d times with timestamp %d; want once with %d", p.reverts.Load(), p.revertTS.Load(), t0+10*second)
	}
	if err := l.Check(t0); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Check after Close = %v, want ErrClosed", err)
	}
	if !isClosed(l.Lost()) || !errors.Is(l.Err(), engine.ErrClosed) {
		t.Fatalf("after Close: Lost closed %v, Err %v", isClosed(l.Lost()), l.Err())
	}
	if err := l.Close(); err != nil || p.reverts.Load() != 1 {
		t.Fatalf("second Close = %v with %d reverts; want nil, 1", err, p.reverts.Load())
	}
	if _, asleep := clk.state(); asleep != 0 {
		t.Fatal("heartbeat goroutine still sleeping after Close")
	}
	eventually(t, "goroutines back to the count before Acquire", func() bool { return runtime.NumGoroutine() <= before })

	// The next holder waits out the timestamp the lease used last (once the
	// clock is past it: a free ID stamped ahead goes out last).
	clk.Advance(11 * time.Second)
	st, err := mem.Distribute(t.Context(), machine.Instance{Namespace: "orders", ID: "b"}, leased.DefaultMachineBits, leased.DefaultSafeGuard)
	if err != nil || st.MachineID != l.MachineID() || st.LastTimestamp != t0+10*second {
		t.Fatalf("next instance got %+v, %v; want machine ID %d with LastTimestamp %d", st, err, l.MachineID(), t0+10*second)
	}
}

// failingRevert is a distributor whose store is gone by the time Close runs.
type failingRevert struct{ machine.Distributor }

func (failingRevert) Revert(context.Context, machine.Instance, machine.State) error {
	return fmt.Errorf("%w: store gone", engine.ErrStoreUnavailable)
}

func TestLeaseCloseReportsRevertError(t *testing.T) {
	l := acquire(t, failingRevert{machine.Manual(1)}, instA, leased.LeaseSettings{Clock: newTestClock()})
	if err := l.Close(); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("Close = %v, want the Revert error", err)
	}
	if !errors.Is(l.Err(), engine.ErrClosed) {
		t.Fatalf("Err after a failed Revert = %v, want ErrClosed", l.Err())
	}
}

func TestAcquireValidation(t *testing.T) {
	clk := newTestClock()
	full := machinetest.NewMemory(clk)
	for _, id := range []string{"x", "y"} {
		if _, err := full.Distribute(t.Context(), machine.Instance{Namespace: "orders", ID: id}, 1, leased.DefaultSafeGuard); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		d    machine.Distributor
		inst machine.Instance
		opts leased.LeaseSettings
		want error
	}{
		{"nil distributor", nil, instA, leased.LeaseSettings{}, engine.ErrInvalidConfig},
		{"invalid instance", machine.Manual(1), machine.Instance{ID: "a"}, leased.LeaseSettings{}, engine.ErrInvalidConfig},
		{"negative machine bits", machine.Manual(1), instA, leased.LeaseSettings{MachineBits: -1}, engine.ErrInvalidConfig},
		{"32 machine bits", machine.Manual(1), instA, leased.LeaseSettings{MachineBits: 32}, engine.ErrInvalidConfig},
		{"negative safe-guard", machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: -1}}, engine.ErrInvalidConfig},
		{"zero heartbeat", machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: -1}}, engine.ErrInvalidConfig},
		{"heartbeat inside the margin", machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: 4 * time.Minute}}, engine.ErrInvalidConfig},
		{"heartbeat = safe-guard", machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: 5 * time.Minute, SkewMargin: -1}}, engine.ErrInvalidConfig},
		{"margin = safe-guard", machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{SkewMargin: 5 * time.Minute}}, engine.ErrInvalidConfig},
		{"manual ID too wide", machine.Manual(1024), instA, leased.LeaseSettings{}, engine.ErrMachineIDOverflow},
		{"namespace full", full, instA, leased.LeaseSettings{MachineBits: 1, Clock: clk}, engine.ErrMachineIDOverflow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = discard
			l, err := leased.Acquire(t.Context(), c.d, c.inst, c.opts)
			if !errors.Is(err, c.want) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Acquire = %v, want an error wrapping %v", err, c.want)
			}
		})
	}
	t.Run("heartbeat just inside the window", func(t *testing.T) {
		l := acquire(t, machine.Manual(1), instA, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: 4 * time.Minute, SkewMargin: -1}, Clock: clk})
		if l.MachineID() != 1 {
			t.Fatalf("MachineID = %d, want 1", l.MachineID())
		}
	})
}

// A restart after the clock went back: the lease over LocalState hands the
// new generator the timestamp the previous run used.
func TestLeaseLocalStateRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newTestClock()
	d := leased.LocalState(dir, machine.Manual(3), nil)
	t0 := clk.ms()
	l := acquire(t, d, instA, leased.LeaseSettings{Clock: clk, TimestampSource: func() int64 { return t0 + 2*second }})
	if l.State().LastTimestamp != 0 {
		t.Fatalf("first run: LastTimestamp %d, want 0", l.State().LastTimestamp)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.state"))
	if len(files) != 1 {
		t.Fatalf("state files: %v, want one", files)
	}
	if data, _ := os.ReadFile(files[0]); string(data) != fmt.Sprintf("3|%d", t0+2*second) {
		t.Fatalf("state file holds %q", data)
	}

	clk.Advance(-time.Minute) // the clock went back while the process was down
	again := acquire(t, leased.LocalState(dir, machine.Manual(3), nil), instA, leased.LeaseSettings{Clock: clk})
	if st := again.State(); st.MachineID != 3 || st.LastTimestamp != t0+2*second {
		t.Fatalf("restart: State %+v, want machine ID 3 and LastTimestamp %d", st, t0+2*second)
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	clk := newTestClock()
	l := acquire(t, machine.Manual(1), instA, leased.LeaseSettings{Clock: clk})
	now := clk.ms()
	if allocs := testing.AllocsPerRun(1000, func() { _ = l.Check(now) }); allocs != 0 {
		t.Fatalf("Check allocates %v times per call", allocs)
	}
}

func BenchmarkLeaseCheck(b *testing.B) {
	l, err := leased.Acquire(b.Context(), machine.Manual(1), instA, leased.LeaseSettings{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	now := time.Now().UnixMilli()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.Check(now) != nil {
				b.Fatal("lease refused")
			}
		}
	})
}

// With a reservation the store always holds a timestamp at or past every
// timestamp the lease lets a generator use, so a successor that waits out
// the stored timestamp cannot meet a predecessor killed without Close, even
// if the clock went back in between.
func TestLeaseReservation(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk)}
	t0 := clk.ms()
	opts := leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute, Heartbeat: 300 * time.Millisecond}, Clock: clk, Reservation: time.Second}
	l := acquire(t, p, instA, opts)
	if l.Reservation() != time.Second {
		t.Fatalf("Reservation() = %v", l.Reservation())
	}
	if got := p.lastTS.Load(); got != t0+second {
		t.Fatalf("Acquire stored %d, want the reservation %d", got, t0+second)
	}
	if err := l.Check(t0 + second); err != nil {
		t.Fatalf("Check at the end of the reservation: %v", err)
	}
	wantLost(t, l.Check(t0+second+1), "Check past the reservation")

	clk.beat(t) // at t0+300ms: reserves up to t0+1300ms
	if err := l.Check(t0 + 1300); err != nil {
		t.Fatalf("Check within the renewed reservation: %v", err)
	}
	wantLost(t, l.Check(t0+1301), "Check past the renewed reservation")

	// The process dies without Close and the clock goes back 5 s. The
	// successor on the same instance gets the reservation to wait out: later
	// than anything the dead lease accepted.
	leased.Abandon(l)
	clk.Advance(-5 * time.Second)
	next, err := leased.Acquire(t.Context(), p, instA, withLogger(opts, discard))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.MachineID() != l.MachineID() {
		t.Fatalf("successor got machine ID %d, want its own %d", next.MachineID(), l.MachineID())
	}
	if got := next.State().LastTimestamp; got < t0+1300 {
		t.Fatalf("successor waits out %d, before %d which the dead lease accepted", got, t0+1300)
	}
}

// TestLeaseCleanCloseLeavesNoReservation: a lease that knows the generator's
// newest timestamp gives the ID back with that, not with the reservation its
// heartbeats stored, so a successor after a clean stop does not wait ~1 s.
func TestLeaseCleanCloseLeavesNoReservation(t *testing.T) {
	clk := newTestClock()
	p := &probe{Distributor: machinetest.NewMemory(clk)}
	t0 := clk.ms()
	used := t0 + 100 // the newest timestamp the generator issued
	opts := leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute, Heartbeat: 300 * time.Millisecond}, Clock: clk, Reservation: time.Second, TimestampSource: func() int64 { return used }}
	l := acquire(t, p, instA, opts)
	clk.beat(t) // at t0+300ms: reserves up to t0+1300ms
	if got := p.lastTS.Load(); got != t0+1300 {
		t.Fatalf("the heartbeat stored %d, want the reservation %d", got, t0+1300)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	next, err := leased.Acquire(t.Context(), p, instA, leased.LeaseSettings{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	// Close ran at t0+300ms, after the last ID (t0+100).
	if got := next.State().LastTimestamp; next.MachineID() != l.MachineID() || got != t0+300 {
		t.Fatalf("successor got machine ID %d waiting out %d; want ID %d and %d (the close, not the reservation %d)",
			next.MachineID(), got, l.MachineID(), t0+300, t0+1300)
	}
}

func TestLeaseReservationValidation(t *testing.T) {
	mem := machinetest.NewMemory(newTestClock())
	for _, s := range []leased.LeaseSettings{
		{Lease: machine.Settings{Heartbeat: time.Second}, Reservation: time.Second},
		{Lease: machine.Settings{SafeGuard: time.Minute}, Reservation: time.Hour},
	} {
		if _, err := leased.Acquire(t.Context(), mem, instA, s); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("Acquire with %+v: %v, want ErrInvalidConfig", s, err)
		}
	}
}

// windowed is a distributor with a ride-through window, as the SQL and
// Redis stores are.
type windowed struct {
	machine.Distributor
	window time.Duration
}

func (w windowed) Terms() machine.Terms {
	t := w.Distributor.Terms()
	t.RideThrough = w.window
	return t
}

// TestLeaseRefusesWindowPastSafeGuard: a store's RideThrough longer than
// the lease's SafeGuard minus SkewMargin is refused by name, not cut short:
// past that the machine ID may be reclaimed, so the lease would stop
// issuing before the window it promises. Up to it, it is taken whole.
func TestLeaseRefusesWindowPastSafeGuard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		opts   leased.LeaseSettings
		want   string // "" accepted
	}{
		{"default safe-guard", 5 * time.Minute, leased.LeaseSettings{},
			"the store's RideThrough 5m0s must not be longer than the lease's SafeGuard 5m0s minus SkewMargin 1m0s (4m0s)"},
		{"short safe-guard", 60 * time.Second, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute}},
			"the store's RideThrough 1m0s must not be longer than the lease's SafeGuard 1m0s minus SkewMargin 12s (48s)"},
		{"explicit margin", 60 * time.Second, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: 70 * time.Second, SkewMargin: 15 * time.Second}},
			"SafeGuard 1m10s minus SkewMargin 15s (55s)"},
		{"at the limit", 48 * time.Second, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute}}, ""},
		{"safe-guard above 5/4 of it", 60 * time.Second, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: 2 * time.Minute}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := windowed{machinetest.NewMemory(clock.System), tc.window}
			inst := machine.Instance{Namespace: "window", ID: tc.name}
			l, err := leased.Acquire(t.Context(), d, inst, withLogger(tc.opts, discard))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				defer l.Close()
				if got := l.Reservation(); got != tc.window {
					t.Fatalf("Reservation() = %v, want the store's window %v", got, tc.window)
				}
				return
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Acquire = %v; want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

func TestLeaseWaitOut(t *testing.T) {
	// clocktest.Fake, not testClock: two goroutines sleep here (the heartbeat and
	// WaitOut), and each needs its own wake-up time.
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	clk.ManualSleep = true
	mem := machinetest.NewMemory(clk)
	t0 := clk.Now().UnixMilli()
	// A previous run of the stable instance reserved 800 ms ahead and
	// reverted.
	a := machine.Instance{Namespace: "orders", ID: "a", Stable: true}
	st, err := mem.Distribute(t.Context(), a, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st.LastTimestamp = t0 + 800
	if err := mem.Revert(t.Context(), a, st); err != nil {
		t.Fatal(err)
	}
	opts := leased.LeaseSettings{Lease: machine.Settings{Heartbeat: 300 * time.Millisecond}, Clock: clk, Reservation: time.Second}
	l := acquire(t, mem, a, opts)
	done := make(chan error, 1)
	go func() { done <- l.WaitOut(t.Context()) }()
	eventually(t, "the heartbeat and WaitOut asleep", func() bool { return clk.Sleeps() >= 2 })
	clk.Advance(801 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("WaitOut: %v", err)
	}
	if now := clk.Now().UnixMilli(); now <= t0+800 {
		t.Fatalf("WaitOut returned at %d, not past %d", now, t0+800)
	}

	// A clock further behind than the reservation allows is an error, at once.
	clk.Advance(-10 * time.Second)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := acquire(t, mem, a, opts)
	if err := l3.WaitOut(t.Context()); !errors.Is(err, engine.ErrClockBackwards) {
		t.Fatalf("WaitOut 10 s behind: %v, want ErrClockBackwards", err)
	}
}

// graced is a distributor with a reset grace, as the SQL and Redis stores are.
type graced struct {
	machine.Distributor
	grace time.Duration
}

func (g graced) Terms() machine.Terms {
	t := g.Distributor.Terms()
	t.ResetGrace = g.grace
	return t
}

// TestLeaseOutlivingResetGraceRefused: a lease that may go on issuing
// without its store for as long as the store's reset grace is refused by
// name, since a newcomer on the reset store could take its machine ID while
// it still issues; one that stops in time, or a store without a grace, is
// accepted.
func TestLeaseOutlivingResetGraceRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		opts  leased.LeaseSettings
		want  string // "" accepted
	}{
		{"defaults", 2 * time.Second, leased.LeaseSettings{}, ""},
		{"no reservation", 2 * time.Second, leased.LeaseSettings{Reservation: -1},
			"up to 4m0s without its store (no reservation: SafeGuard 5m0s minus SkewMargin 1m0s), not less than the store's ResetGrace 2s"},
		{"reservation from a slow heartbeat", 2 * time.Second, leased.LeaseSettings{Lease: machine.Settings{Heartbeat: time.Second}},
			"up to 4s without its store (the default Lease.Reservation, 4 × Heartbeat 1s)"},
		{"reservation equal to the grace", 2 * time.Second, leased.LeaseSettings{Reservation: 2 * time.Second},
			"(Lease.Reservation 2s)"},
		{"reservation up to the safe-guard", 30 * time.Second, leased.LeaseSettings{Lease: machine.Settings{SafeGuard: time.Minute}, Reservation: 40 * time.Second},
			"up to 40s without its store (Lease.Reservation 40s)"},
		{"no reservation, grace above the safe-guard", 10 * time.Minute, leased.LeaseSettings{Reservation: -1}, ""},
		{"no grace", -1, leased.LeaseSettings{Reservation: -1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := graced{machinetest.NewMemory(clock.System), tc.grace}
			inst := machine.Instance{Namespace: "grace", ID: tc.name}
			l, err := leased.Acquire(t.Context(), d, inst, withLogger(tc.opts, discard))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				l.Close()
				return
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Acquire = %v; want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

// serverClock is a distributor with a server clock skew ahead of clk,
// whose answer takes rtt on clk: the server reads its time half way. It
// fails with err, and counts its calls.
type serverClock struct {
	machine.Distributor
	clk       *clocktest.Fake
	skew, rtt time.Duration
	err       error
	calls     *atomic.Int64
}

func (s serverClock) ServerTime(context.Context) (time.Time, error) {
	s.calls.Add(1)
	s.clk.Advance(s.rtt / 2)
	at := s.clk.Now().Add(s.skew)
	s.clk.Advance(s.rtt / 2)
	return at, s.err
}

// TestAcquireChecksServerClock: Acquire compares the lease's clock with the
// distributor's server clock, allowing half the round trip, against the
// skew margin (a fifth of the safe-guard by default: 1 minute): beyond it
// refused, beyond half of it a warning, with no margin not asked at all.
func TestAcquireChecksServerClock(t *testing.T) {
	for i, tc := range []struct {
		skew, rtt time.Duration // the server's clock ahead of the lease's
		opts      *leased.LeaseSettings
		fail      bool // the server clock cannot be read
		refuse    error
		warn      string // in the warning; "" none
	}{
		{skew: 70 * time.Second, refuse: engine.ErrClockSkew},
		{skew: 70 * time.Second, rtt: 40 * time.Second, warn: "skew=-1m10s round_trip=40s skew_margin=1m0s"},
		{skew: -90 * time.Second, rtt: 40 * time.Second, refuse: engine.ErrClockSkew},
		{skew: -40 * time.Second, warn: "skew=40s"},
		{skew: 20 * time.Second},
		{skew: time.Hour, opts: &leased.LeaseSettings{Lease: machine.Settings{SkewMargin: -1}}},
		{fail: true, refuse: engine.ErrStoreUnavailable},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
			clk.ManualSleep = true
			var logs strings.Builder
			d := serverClock{Distributor: machinetest.NewMemory(clk), clk: clk, skew: tc.skew, rtt: tc.rtt, calls: new(atomic.Int64)}
			if tc.fail {
				d.err = fmt.Errorf("%w: server gone", engine.ErrStoreUnavailable)
			}
			var opts leased.LeaseSettings
			if tc.opts != nil {
				opts = *tc.opts
			}
			opts.Clock, opts.Logger = clk, slog.New(slog.NewTextHandler(&logs, nil))
			l, err := leased.Acquire(t.Context(), d, instA, opts)
			if l != nil {
				l.Close()
			}
			warned := strings.Contains(logs.String(), "level=WARN")
			switch {
			case tc.refuse != nil:
				if !errors.Is(err, tc.refuse) {
					t.Fatalf("skew %v, round trip %v: Acquire = %v; want %v", tc.skew, tc.rtt, err, tc.refuse)
				}
				t.Logf("refusal: %v", err)
			case err != nil:
				t.Fatalf("skew %v, round trip %v: Acquire = %v; want it accepted", tc.skew, tc.rtt, err)
			case warned != (tc.warn != "") || !strings.Contains(logs.String(), tc.warn):
				t.Fatalf("skew %v, round trip %v: log %q; want a warning %v saying %q", tc.skew, tc.rtt, logs.String(), tc.warn != "", tc.warn)
			}
			if calls := d.calls.Load(); tc.opts != nil && calls != 0 {
				t.Fatalf("with no skew margin the server clock was read %d times", calls)
			}
		})
	}
	// What the refusal says.
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	d := serverClock{Distributor: machinetest.NewMemory(clk), clk: clk, skew: -90 * time.Second, rtt: 40 * time.Second, calls: new(atomic.Int64)}
	_, err := leased.Acquire(t.Context(), d, instA, leased.LeaseSettings{Clock: clk, Logger: discard})
	for _, want := range []string{"the local clock (2026-06-01T12:00:20.000Z) is 1m30s ahead of the store's server clock (2026-06-01T11:58:50.000Z)",
		"skew margin 1m0s even allowing 20s for half the round trip", "synchronise this host's clock"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

func TestHolderString(t *testing.T) {
	h := machine.Holder("KQ3TEXAMPLESECRETVALUE2345")
	if s := h.String(); len(s) != 8 || strings.Contains(string(h), s) || s != machine.Holder(string(h)).String() {
		t.Fatalf("Holder.String() = %q; want 8 hex digits of a hash, stable, not part of the secret", s)
	}
	if s := fmt.Sprintf("%+v", machine.State{MachineID: 1, Holder: h}); strings.Contains(s, string(h)) {
		t.Fatalf("a State printed with %%+v shows its secret: %s", s)
	}
	if s := machine.Holder("").String(); s != "none" {
		t.Fatalf("empty Holder.String() = %q, want none", s)
	}
}

// withLogger returns s logging to l.
func withLogger(s leased.LeaseSettings, l *slog.Logger) leased.LeaseSettings {
	s.Logger = l
	return s
}

// Manual and StatefulSet hand every instance the same number, so within one
// process Acquire lets one lease at a time hold it.
func TestFixedIDOneLeaseAtATime(t *testing.T) {
	ctx := context.Background()
	t.Setenv("HOSTNAME", "web-7")
	for name, d := range map[string]machine.Distributor{
		"Manual":                 machine.Manual(7),
		"StatefulSet":            machine.StatefulSet(),
		"LocalState over Manual": leased.LocalState(t.TempDir(), machine.Manual(7), nil),
	} {
		t.Run(name, func(t *testing.T) {
			ns := "fixed-" + name
			a := machine.Instance{Namespace: ns, ID: "a"}
			b := machine.Instance{Namespace: ns, ID: "b"}
			la, err := leased.Acquire(ctx, d, a, leased.LeaseSettings{})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range []machine.Instance{a, b} {
				if l, err := leased.Acquire(ctx, d, in, leased.LeaseSettings{}); !errors.Is(err, engine.ErrInvalidConfig) ||
					!strings.Contains(err.Error(), `instance "a"`) {
					if l != nil {
						l.Close()
					}
					t.Fatalf("%s got machine ID 7 while a holds it: %v", in.Namespace+"/"+in.ID, err)
				}
			}
			other, err := leased.Acquire(ctx, d, machine.Instance{Namespace: ns + "-other", ID: "b"}, leased.LeaseSettings{})
			if err != nil {
				t.Fatal(err)
			}
			other.Close()
			if err := la.Close(); err != nil {
				t.Fatal(err)
			}
			lb, err := leased.Acquire(ctx, d, b, leased.LeaseSettings{})
			if err != nil || lb.MachineID() != 7 {
				t.Fatalf("after a closed, b got %v, %v", lb, err)
			}
			lb.Close()
		})
	}
}
