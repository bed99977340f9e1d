package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/internal/timebase"
)

// longLived leaves its state word too few spare sequence values for the
// atomic-add fast path: every ID takes the compare-and-swap path.
var longLived = Layout{Epoch: defaultEpoch, TimestampBits: 50, MachineBits: 0, SequenceBits: 13, Unit: time.Millisecond}

// start is a whole millisecond, so clock steps come out as round durations.
var start = time.Date(2026, 6, 23, 13, 17, 30, 192e6, time.UTC)

func newGen(t testing.TB, machine int64, s ...Settings) *Generator {
	t.Helper()
	g, err := New(machine, s...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newStarted is newGen with what Resume takes: the last timestamp to wait
// out and the fence.
func newStarted(t testing.TB, machine int64, s Settings, last int64, fence func(int64) error) *Generator {
	t.Helper()
	g, err := newGenerator(machine, s, last, fence)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func next(t testing.TB, g *Generator) int64 {
	t.Helper()
	id, err := g.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// residueRatio counts ids by id % n and returns max/min (+Inf if a residue is unused).
func residueRatio(ids []int64, n int64) (ratio float64, used int) {
	counts := make([]int, n)
	for _, id := range ids {
		counts[id%n]++
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	for _, c := range counts {
		if c > 0 {
			used++
		}
	}
	if lo == 0 {
		return float64(hi) / 0, used
	}
	return float64(hi) / float64(lo), used
}

// TestThresholdSpreadsShards is DESIGN.md's evenness target: from one ID a
// second to saturation, id % n for n in {2,3,4,8,16} stays within 1.05
// max/min over 10,000 IDs.
func TestThresholdSpreadsShards(t *testing.T) {
	rates := []struct {
		name         string
		perTick, gap int // perTick IDs, then advance gap ms
	}{
		{"1/s", 1, 1000},
		{"1/ms", 1, 1},
		{"7/ms", 7, 1},
		{"100/ms", 100, 1},
		{"saturated", 1 << 20, 1}, // never advances by hand: only sequence overflow moves the clock
	}
	for _, r := range rates {
		t.Run(r.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			g := newGen(t, 5, Settings{Clock: clk})
			ids := make([]int64, 0, 10_000)
			for len(ids) < cap(ids) {
				for i := 0; i < r.perTick && len(ids) < cap(ids); i++ {
					ids = append(ids, next(t, g))
				}
				clk.Advance(time.Duration(r.gap) * time.Millisecond)
			}
			for _, n := range []int64{2, 3, 4, 8, 16} {
				if ratio, used := residueRatio(ids, n); ratio > 1.05 {
					t.Errorf("id %% %d: max/min = %.3f, %d of %d residues used", n, ratio, used, n)
				}
			}
		})
	}
}

// TestResetEveryTickSkews is the contrast: a per-tick reset puts every
// low-traffic ID on one residue, so the test above cannot pass by accident.
func TestResetEveryTickSkews(t *testing.T) {
	l := Default
	l.SequenceResetThreshold = resetEveryTick
	for _, gap := range []time.Duration{time.Millisecond, time.Second} {
		clk := clocktest.NewFake(start)
		g := newGen(t, 5, Settings{Clock: clk, Layout: l})
		ids := make([]int64, 10_000)
		for i := range ids {
			ids[i] = next(t, g)
			clk.Advance(gap)
		}
		for _, n := range []int64{2, 16} {
			if _, used := residueRatio(ids, n); used != 1 {
				t.Errorf("gap %v: per-tick reset used %d residues of id %% %d, want 1", gap, used, n)
			}
		}
	}
}

func TestSequenceContinuesBelowThreshold(t *testing.T) {
	l := Default
	l.SequenceResetThreshold = 3
	clk := clocktest.NewFake(start)
	g := newGen(t, 1, Settings{Clock: clk, Layout: l})
	var seqs []int64
	for range 10 {
		p := parts(l, next(t, g))
		seqs = append(seqs, p.Sequence)
		clk.Advance(time.Millisecond)
	}
	if want := []int64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}; !slices.Equal(seqs, want) {
		t.Errorf("sequences %v, want %v", seqs, want)
	}
}

func assertIncreasing(t *testing.T, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ids[%d] = %d is not above ids[%d] = %d", i, ids[i], i-1, ids[i-1])
		}
	}
}

func TestShortStepBackIsWaitedOut(t *testing.T) {
	clk := clocktest.NewFake(start)
	g := newGen(t, 1, Settings{Clock: clk})
	var ids []int64
	for range 5 {
		ids = append(ids, next(t, g), next(t, g))
		clk.Advance(time.Millisecond)
	}
	lastTick := ids[len(ids)-1] >> 22
	if n := g.waits(); n != 0 {
		t.Fatalf("BackwardsWaits = %d before any step back", n)
	}
	clk.Advance(-2 * time.Millisecond)
	sleeps := clk.Sleeps()
	for range 50 {
		ids = append(ids, next(t, g))
	}
	if clk.Sleeps() == sleeps {
		t.Fatal("the step back was not waited out on the clock")
	}
	if n := g.waits(); n != 1 {
		t.Errorf("BackwardsWaits = %d, want 1: one call waited, the rest issued on its tick", n)
	}
	if tick := ids[10] >> 22; tick < lastTick {
		t.Errorf("ID after the step back has tick %d, before the last tick %d", tick, lastTick)
	}
	assertIncreasing(t, ids)
}

func TestLongStepBackErrors(t *testing.T) {
	clk := clocktest.NewFake(start)
	g := newGen(t, 1, Settings{Clock: clk})
	last := next(t, g)
	clk.Advance(-5 * time.Second)
	_, err := g.NextID(context.Background())
	if !errors.Is(err, engine.ErrClockBackwards) {
		t.Fatalf("err = %v, want ErrClockBackwards", err)
	}
	if !strings.Contains(err.Error(), "5s behind") {
		t.Errorf("message %q does not say by how much", err)
	}
	if g.LastTimestamp() != start.UnixMilli() {
		t.Errorf("LastTimestamp moved to %d on a failed NextID", g.LastTimestamp())
	}
	clk.Advance(5 * time.Second)
	if id := next(t, g); id <= last {
		t.Errorf("after the clock recovered: %d <= %d", id, last)
	}
}

func TestMaxBackwardsZeroFailsAtOnce(t *testing.T) {
	clk := clocktest.NewFake(start)
	g := newGen(t, 1, Settings{Clock: clk, MaxBackwards: -1})
	next(t, g)
	clk.Advance(-time.Millisecond)
	if _, err := g.NextID(context.Background()); !errors.Is(err, engine.ErrClockBackwards) || !strings.Contains(err.Error(), "1ms") {
		t.Fatalf("err = %v, want ErrClockBackwards by 1ms", err)
	}
	if clk.Sleeps() != 0 {
		t.Errorf("slept %d times with MaxBackwards 0", clk.Sleeps())
	}
}

func TestSequenceOverflowWaitsATick(t *testing.T) {
	small := Layout{Epoch: defaultEpoch, TimestampBits: 31, MachineBits: 10, SequenceBits: 8, Unit: time.Second}
	for _, l := range []Layout{Default, small, longLived} {
		t.Run(l.String(), func(t *testing.T) {
			clk := clocktest.NewFake(start)
			g := newGen(t, l.maxMachineID(), Settings{Clock: clk, Layout: l})
			ids := make([]int64, (l.maxSequence()+1)+1)
			for i := range ids {
				ids[i] = next(t, g)
			}
			assertIncreasing(t, ids)
			first := parts(l, ids[0])
			lastOfTick := parts(l, ids[len(ids)-2])
			over := parts(l, ids[len(ids)-1])
			if first.Tick != lastOfTick.Tick || lastOfTick.Sequence != l.maxSequence() {
				t.Fatalf("tick filled up to %+v from %+v", lastOfTick, first)
			}
			if over.Tick != first.Tick+1 || over.Sequence != 0 {
				t.Errorf("overflow ID %+v, want tick %d sequence 0", over, first.Tick+1)
			}
			if clk.Now().Before(over.Time) {
				t.Errorf("clock %v is before the overflow ID's tick %v", clk.Now(), over.Time)
			}
		})
	}
}

func TestTimestampOverflow(t *testing.T) {
	for _, l := range []Layout{Default, JSSafe, JSSafeSeconds} {
		clk := clocktest.NewFake(l.expiry().Add(-l.unit()))
		g := newGen(t, l.maxMachineID(), Settings{Clock: clk, Layout: l})
		// Up to the expiry, even the JS-safe layouts stay within 2^53-1.
		n := min((l.maxSequence() + 1), 4096)
		for range n {
			if id := next(t, g); id > l.maxID() || id < 0 {
				t.Fatalf("%s: id %d above the largest ID %d", l.String(), id, l.maxID())
			}
		}
		if n < (l.maxSequence() + 1) { // else the full tick makes NextID wait for the next one
			clk.Advance(l.unit())
		}
		if id, err := g.NextID(context.Background()); !errors.Is(err, engine.ErrTimestampOverflow) {
			t.Fatalf("%s: past the last tick got %d, %v; want ErrTimestampOverflow", l.String(), id, err)
		}
		clk.Advance(time.Hour)
		if _, err := g.NextID(context.Background()); !errors.Is(err, engine.ErrTimestampOverflow) {
			t.Errorf("%s: after expiry: %v", l.String(), err)
		}
		if _, err := New(0, Settings{Clock: clk, Layout: l}); !errors.Is(err, engine.ErrTimestampOverflow) {
			t.Errorf("%s: New after expiry: %v", l.String(), err)
		}
	}
}

func TestLastTimestampAtStartUp(t *testing.T) {
	clk := clocktest.NewFake(start)
	ahead := start.Add(2 * time.Millisecond).UnixMilli()
	if g := newGen(t, 1, Settings{Clock: clk}); g.LastTimestamp() != 0 {
		t.Errorf("LastTimestamp of a new generator = %d, want 0", g.LastTimestamp())
	}
	g := newStarted(t, 1, Settings{Clock: clk}, ahead, nil)
	if g.LastTimestamp() != ahead {
		t.Errorf("LastTimestamp before the first ID = %d, want %d", g.LastTimestamp(), ahead)
	}
	p := parts(Default, next(t, g))
	if p.Time.UnixMilli() <= ahead {
		t.Errorf("first ID at %v, not after the saved timestamp %v", p.Time, time.UnixMilli(ahead).UTC())
	}
	if g.LastTimestamp() != p.Time.UnixMilli() {
		t.Errorf("LastTimestamp = %d, want the ID's %d", g.LastTimestamp(), p.Time.UnixMilli())
	}

	_, err := newGenerator(1, Settings{Clock: clk}, clk.Now().Add(5*time.Second).UnixMilli(), nil)
	if !errors.Is(err, engine.ErrClockBackwards) || !strings.Contains(err.Error(), "5s behind") {
		t.Errorf("5 s ahead: %v, want ErrClockBackwards saying 5s", err)
	}

	// Garbage far in the future is an error, also when its nanoseconds
	// would wrap around int64 to about now (the year 2611).
	long := Layout{Epoch: defaultEpoch, TimestampBits: 50, MachineBits: 0, SequenceBits: 13, Unit: time.Millisecond}
	wraps := int64(math.MaxUint64/1_000_000 + uint64(clk.Now().UnixNano())/1_000_000)
	if _, err := newGenerator(0, Settings{Clock: clk, Layout: long}, wraps, nil); !errors.Is(err, engine.ErrClockBackwards) {
		t.Errorf("saved timestamp %v: %v, want ErrClockBackwards", time.UnixMilli(wraps).UTC(), err)
	}

	// A saved timestamp in the past only marks its tick as used.
	past := clk.Now().Add(-time.Hour).UnixMilli()
	g = newStarted(t, 1, Settings{Clock: clk}, past, nil)
	if p := parts(Default, next(t, g)); !p.Time.Equal(clk.Now()) {
		t.Errorf("with an old saved timestamp the ID is at %v, want now %v", p.Time, clk.Now())
	}
}

func TestFenceStopsIssuing(t *testing.T) {
	clk := clocktest.NewFake(start)
	var lost atomic.Bool
	var seen atomic.Int64
	fence := func(ms int64) error {
		seen.Store(ms)
		if lost.Load() {
			return fmt.Errorf("%w: lease expired", engine.ErrMachineIDLost)
		}
		return nil
	}
	g := newStarted(t, 1, Settings{Clock: clk}, 0, fence)
	p := parts(Default, next(t, g))
	if seen.Load() != p.Time.UnixMilli() {
		t.Errorf("fence saw %d, want the ID's time %d", seen.Load(), p.Time.UnixMilli())
	}
	lost.Store(true)
	for range 2 { // within the same tick, then in the next
		if id, err := g.NextID(context.Background()); !errors.Is(err, engine.ErrMachineIDLost) {
			t.Fatalf("after the lease lapsed: %d, %v", id, err)
		}
		clk.Advance(time.Millisecond)
	}
	if g.LastTimestamp() != p.Time.UnixMilli() {
		t.Errorf("a refused ID moved LastTimestamp")
	}
}

func TestContextCancelWhileWaiting(t *testing.T) {
	small := Layout{Epoch: defaultEpoch, TimestampBits: 31, MachineBits: 10, SequenceBits: 1, Unit: time.Second}
	cases := map[string]struct {
		layout Layout
		setup  func(*clocktest.Fake, *Generator)
	}{
		"step back": {Default, func(clk *clocktest.Fake, g *Generator) {
			next(t, g)
			clk.Advance(-5 * time.Millisecond)
		}},
		"sequence overflow": {small, func(clk *clocktest.Fake, g *Generator) {
			next(t, g)
			next(t, g)
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			clk.ManualSleep = true // sleeps block until the test moves the clock
			g := newGen(t, 1, Settings{Clock: clk, Layout: c.layout})
			c.setup(clk, g)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := g.NextID(ctx)
				done <- err
			}()
			for clk.Sleeps() == 0 {
				runtime.Gosched()
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		})
	}
}

// A caller queued behind another one that waits for the next tick still
// honours its own ctx.
func TestQueuedWaiterHonoursContext(t *testing.T) {
	small := Layout{Epoch: defaultEpoch, TimestampBits: 31, MachineBits: 10, SequenceBits: 1, Unit: time.Second}
	clk := clocktest.NewFake(start)
	clk.ManualSleep = true
	g := newGen(t, 1, Settings{Clock: clk, Layout: small})
	last := next(t, g)
	last = max(last, next(t, g)) // the second's two IDs are used up
	ctxA, cancelA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() {
		_, err := g.NextID(ctxA)
		doneA <- err
	}()
	for clk.Sleeps() == 0 { // A sleeps on the clock, holding the wait
		runtime.Gosched()
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	cancelB()
	if _, err := g.NextID(ctxB); !errors.Is(err, context.Canceled) {
		t.Errorf("queued caller: %v, want context.Canceled", err)
	}
	cancelA()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting caller: %v, want context.Canceled", err)
	}
	clk.Advance(time.Second)
	if id := next(t, g); id <= last {
		t.Errorf("after the waits: %d <= %d", id, last)
	}
}

func TestNewRejects(t *testing.T) {
	cases := map[string]struct {
		machine int64
		set     Settings
	}{
		"machine too big":       {1024, Settings{}},
		"negative machine":      {-1, Settings{}},
		"machine above JS-safe": {8, Settings{Layout: JSSafe}},
	}
	for name, c := range cases {
		if _, err := New(c.machine, c.set); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := newGenerator(0, Settings{}, -1, nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("negative last timestamp: %v, want ErrInvalidConfig", err)
	}
	clk := clocktest.NewFake(defaultEpoch.Add(-time.Hour))
	g := newGen(t, 0, Settings{Clock: clk})
	if _, err := g.NextID(context.Background()); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "before the epoch") {
		t.Errorf("clock before the epoch: %v", err)
	}
}

func TestNoAllocations(t *testing.T) {
	g := newGen(t, 1)
	ctx := context.Background()
	if n := testing.AllocsPerRun(10_000, func() { g.NextID(ctx) }); n != 0 {
		t.Errorf("%v allocations per ID", n)
	}
}

// TestOverrunSequenceWaitsATick: callers racing past MaxSequence with the
// atomic add leave the sequence field above it; that reads as a used-up tick.
func TestOverrunSequenceWaitsATick(t *testing.T) {
	clk := clocktest.NewFake(start)
	g := newGen(t, 2, Settings{Clock: clk})
	first := parts(Default, next(t, g))
	g.state.Store(g.pack(first.Tick, g.seqMask+3))
	p := parts(Default, next(t, g))
	if p.Tick != first.Tick+1 || p.Sequence != 0 {
		t.Errorf("after an overrun tick %d: %+v, want the next tick at sequence 0", first.Tick, p)
	}
}

func TestConcurrentIDsAreDistinct(t *testing.T) {
	cached := timebase.NewCached(time.Millisecond)
	defer cached.Close()
	cases := []struct {
		name                   string
		machine                int64
		set                    Settings
		goroutines, perRoutine int
	}{
		// The heaviest load: most IDs race for the last numbers of a tick.
		{"default", 1000, Settings{}, 16, 250_000},
		// 512 IDs per millisecond: ticks run out all the time.
		{"jssafe", 7, Settings{Layout: JSSafe}, 8, 20_000},
		// Compare-and-swap on every ID.
		{"long-lived", 0, Settings{Layout: longLived}, 8, 50_000},
		// Never runs out of sequence: the atomic add alone.
		{"wide-cached", 0, Settings{Layout: wide, Clock: cached}, 8, 100_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGen(t, c.machine, c.set)
			if want := c.name != "long-lived"; g.fastAdd != want {
				t.Errorf("fast path %v, want %v", g.fastAdd, want)
			}
			checkDistinct(t, g, c.goroutines, c.perRoutine)
		})
	}
}

func checkDistinct(t *testing.T, g *Generator, goroutines, perGoroutine int) {
	all := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for w := range all {
		wg.Go(func() {
			ids := make([]int64, perGoroutine)
			for i := range ids {
				id, err := g.NextID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = id
			}
			all[w] = ids
		})
	}
	wg.Wait()
	merged := make([]int64, 0, goroutines*perGoroutine)
	for w, ids := range all {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("goroutine %d: id %d after %d", w, ids[i], ids[i-1])
			}
		}
		merged = append(merged, ids...)
	}
	if len(merged) != goroutines*perGoroutine {
		t.Fatalf("%d IDs, want %d", len(merged), goroutines*perGoroutine)
	}
	// A number taken past MaxSequence must never leak into the machine bits.
	l := g.layout
	for _, id := range merged {
		if id>>l.SequenceBits&l.maxMachineID() != g.machine {
			t.Fatalf("id %d carries machine %d, want %d", id, id>>l.SequenceBits&l.maxMachineID(), g.machine)
		}
	}
	slices.Sort(merged)
	for i := 1; i < len(merged); i++ {
		if merged[i] == merged[i-1] {
			t.Fatalf("duplicate ID %d", merged[i])
		}
	}
	if p := parts(g.layout, merged[len(merged)-1]); p.Machine != g.machine {
		t.Errorf("machine %d, want %d", p.Machine, g.machine)
	}
}

// A running generator is on a steady time base: wall-clock steps back of
// any size cost no refusal, no wait and no duplicate, and the IDs go on
// strictly increasing; a step forward is followed.
func TestWallStepsBackNeverReachARunningGenerator(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	g, err := New(1, Settings{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	issue := func(n int) {
		t.Helper()
		for range n {
			id, err := g.NextID(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("ID %d after %d", id, last)
			}
			last = id
		}
	}
	issue(10)
	for _, step := range []time.Duration{50 * time.Millisecond, 5 * time.Second, time.Hour} {
		clk.StepWall(-step)
		issue(10000) // overflows the tick: waits on the time base, not the wall
		clk.Advance(time.Millisecond)
		issue(10)
	}
	if n := g.waits(); n != 0 {
		t.Fatalf("BackwardsWaits = %d after wall steps back, want 0", n)
	}
	clk.StepWall(2 * time.Hour)
	issue(1)
	if got, want := g.LastTimestamp(), clk.Now().UnixMilli(); got != want {
		t.Fatalf("after a wall step forward the last timestamp is %d, want the wall's %d", got, want)
	}
}

// decoded is an ID taken apart for assertions, with its tick.
type decoded struct {
	Time                    time.Time
	Tick, Machine, Sequence int64
}

// parts decodes id, or returns the zero decoded for an ID l cannot hold.
func parts(l Layout, id int64) decoded {
	t, machine, seq, err := l.Decode(id)
	if err != nil {
		return decoded{}
	}
	return decoded{Time: t, Tick: id >> (l.MachineBits + l.SequenceBits), Machine: machine, Sequence: seq}
}
