package chain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// slowFake is a fake store whose every call takes d, like one at the
// other end of a network.
func slowFake(d time.Duration) *segtest.Fake {
	f := segtest.NewFake(0)
	f.SetLatency(d)
	return f
}

// newChain builds a chain with s and o, logging nowhere unless o says where.
func newChain(t *testing.T, d segment.Distributor, s segment.Settings, o ...chain.Owned) *chain.Chain {
	t.Helper()
	var own chain.Owned
	if len(o) > 0 {
		own = o[0]
	}
	if own.Logger == nil {
		own.Logger = quiet
	}
	c, err := chain.New(d, s, own)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond until it holds, failing the test after a generous
// deadline. It never asserts how long anything took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// draw takes n IDs from g on each of goroutines goroutines, checking each
// goroutine's IDs increase, and returns them all.
func draw(t *testing.T, g engine.Generator, goroutines, n int) [][]int64 {
	t.Helper()
	out := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			ids := make([]int64, 0, n)
			ctx := context.Background()
			for range n {
				id, err := g.NextID(ctx)
				if err != nil {
					t.Errorf("goroutine %d: NextID after %d IDs: %v", i, len(ids), err)
					return
				}
				if len(ids) > 0 && id <= ids[len(ids)-1] {
					t.Errorf("goroutine %d: ID %d after %d: not strictly increasing", i, id, ids[len(ids)-1])
					return
				}
				ids = append(ids, id)
			}
			out[i] = ids
		})
	}
	wg.Wait()
	return out
}

// distinct fails the test if an ID appears twice (or is not positive) and
// returns the IDs sorted.
func distinct(t *testing.T, ids ...[]int64) []int64 {
	t.Helper()
	all := slices.Concat(ids...)
	slices.Sort(all)
	for i, id := range all {
		if id <= 0 {
			t.Fatalf("ID %d is not positive", id)
		}
		if i > 0 && id == all[i-1] {
			t.Fatalf("ID %d handed out twice", id)
		}
	}
	return all
}

func TestChainConcurrentDistinct(t *testing.T) {
	const goroutines, n = 16, 100_000
	f := segtest.NewFake(0)
	c := newChain(t, f, segment.Settings{Step: 100})
	all := distinct(t, draw(t, c, goroutines, n)...)
	if len(all) != goroutines*n {
		t.Fatalf("got %d IDs, want %d", len(all), goroutines*n)
	}
	if last := all[len(all)-1]; last > f.Max() {
		t.Fatalf("ID %d beyond anything the store handed out (%d)", last, f.Max())
	}
	if s := c.Stats(); s.Issued != goroutines*n || s.Discarded != 0 {
		t.Fatalf("Stats: Issued %d, Discarded %d; want %d, 0", s.Issued, s.Discarded, goroutines*n)
	}
}

// A slow store with tiny segments makes callers wait for the worker all the
// time: the waiting path must not hand out duplicates either.
func TestChainConcurrentSlowStore(t *testing.T) {
	f := slowFake(200 * time.Microsecond)
	c := newChain(t, f, segment.Settings{Step: 3, SafeDistance: 1}, chain.Owned{MaxPrefetchDistance: 8})
	distinct(t, draw(t, c, 8, 1000)...)
	if s := c.Stats(); s.Hungry == 0 {
		t.Fatalf("no caller waited (Stats %+v): the test did not exercise the waiting path", s)
	}
}

func TestTwoChainsOneStore(t *testing.T) {
	f := segtest.NewFake(0)
	a := newChain(t, f, segment.Settings{Step: 10})
	b := newChain(t, f, segment.Settings{Step: 7})
	var ids [][]int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range []*chain.Chain{a, b} {
		wg.Go(func() {
			got := draw(t, c, 4, 20_000)
			mu.Lock()
			ids = append(ids, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	distinct(t, ids...)
}

func TestChainStoreDown(t *testing.T) {
	f := segtest.NewFake(0)
	c := newChain(t, f, segment.Settings{Step: 10, SafeDistance: 3}, chain.Owned{Name: "order", PrefetchPeriod: 5 * time.Millisecond})
	ctx := context.Background()
	var ids []int64
	next := func(ctx context.Context) error {
		id, err := c.NextID(ctx)
		if err == nil {
			if len(ids) > 0 && id <= ids[len(ids)-1] {
				t.Fatalf("ID %d after %d: not increasing", id, ids[len(ids)-1])
			}
			ids = append(ids, id)
		}
		return err
	}
	if err := next(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chain holds its safe distance", func() bool { return c.Stats().Ahead >= 30 })

	// Draw slowly until the worker, topping up, finds the store down: from
	// then on hunger says nothing about the prefetch distance.
	f.SetDown(true)
	for c.Stats().Failures == 0 {
		if err := next(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	held := c.Stats().Ahead
	var err error
	served := 0
	for ; err == nil; served++ {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err = next(dctx)
		cancel()
	}
	served-- // the failed call
	if int64(served) != held {
		t.Errorf("served %d IDs during the outage, the chain held %d", served, held)
	}
	for _, target := range []error{engine.ErrSegmentExhausted, engine.ErrStoreUnavailable, context.DeadlineExceeded} {
		if !errors.Is(err, target) {
			t.Errorf("dry chain: errors.Is(%v, %v) = false", err, target)
		}
	}
	var ex *chain.ExhaustedError
	if !errors.As(err, &ex) || ex.Name != "order" || ex.Waited <= 0 {
		t.Errorf("dry chain: %#v, want an *ExhaustedError for %q that waited", err, "order")
	}
	if msg := err.Error(); !strings.Contains(msg, "fake store is down") || !strings.Contains(msg, `"order"`) {
		t.Errorf("error %q does not name the chain and the store's failure", msg)
	}
	if s := c.Stats(); s.LastError == nil || s.Hungry == 0 {
		t.Errorf("Stats during the outage: %+v", s)
	}
	calls := f.Calls()
	eventually(t, "the worker retries", func() bool { return f.Calls() > calls+1 })

	// A caller waiting when the store comes back gets an ID without retrying itself.
	hungry := c.Stats().Hungry
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got <- next(ctx)
	}()
	eventually(t, "the caller waits", func() bool { return c.Stats().Hungry > hungry })
	f.SetDown(false)
	if err := <-got; err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
	s := c.Stats()
	if s.LastError != nil {
		t.Errorf("LastError %v after recovery, want nil", s.LastError)
	}
	if s.PrefetchDistance != 3 {
		t.Errorf("PrefetchDistance %d after an outage, want the safe distance 3", s.PrefetchDistance)
	}
	for range 100 {
		if err := next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	distinct(t, ids)
}

// Callers drawing through repeated outages never see a duplicate. Each
// outage lasts until callers have run the chain dry and been refused, and
// each recovery until they draw again: every round is sure to exercise the
// hazard, however fast or slow the machine.
func TestChainOutagesUnderLoad(t *testing.T) {
	const callers, rounds = 4, 5
	f := segtest.NewFake(0)
	c := newChain(t, f, segment.Settings{Step: 5}, chain.Owned{PrefetchPeriod: time.Millisecond})
	stop := make(chan struct{})
	ids := make([][]int64, callers)
	var drawn, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
				id, err := c.NextID(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, engine.ErrSegmentExhausted) {
						t.Errorf("NextID: %v; want ErrSegmentExhausted", err)
						return
					}
					refused.Add(1)
					continue
				}
				if n := len(ids[i]); n > 0 && id <= ids[i][n-1] {
					t.Errorf("ID %d after %d", id, ids[i][n-1])
					return
				}
				ids[i] = append(ids[i], id)
				drawn.Add(1)
			}
		})
	}
	for range rounds {
		before := drawn.Load()
		eventually(t, "callers draw IDs", func() bool { return drawn.Load() > before })
		failures, wasRefused := c.Stats().Failures, refused.Load()
		f.SetDown(true)
		eventually(t, "the worker finds the store down and a caller is refused", func() bool {
			return c.Stats().Failures > failures && refused.Load() > wasRefused
		})
		f.SetDown(false)
	}
	before := drawn.Load()
	eventually(t, "callers draw IDs after the last outage", func() bool { return drawn.Load() > before })
	close(stop)
	wg.Wait()
	distinct(t, ids...)
}

// A store that refuses the sequence (here: a server that does not serve
// it) is no outage: NextID fails at once with the refusal instead of
// waiting MaxWait for a retry, and IDs flow once the store accepts it. The
// refusal is logged once, however many draws and retries meet it and
// however long it lasts (25 s of a fake clock moved a second per retry),
// and the store serving the sequence again once.
func TestChainRefusalFailsAtOnce(t *testing.T) {
	var accept atomic.Bool
	var max atomic.Int64
	d := distFunc(func(ctx context.Context, step int64) (int64, error) {
		if !accept.Load() {
			return 0, fmt.Errorf("%w: proxystore: chain \"other\" is not served here", engine.ErrUnknownGenerator)
		}
		return max.Add(step), nil
	})
	logs := &logCounter{}
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	c := newChain(t, d, segment.Settings{}, chain.Owned{Name: "other", Clock: clk, Logger: slog.New(logs), PrefetchPeriod: time.Millisecond})
	for range 25 { // the first caller waits for the first fetch; the others find the refusal
		_, err := c.NextID(context.Background())
		if !errors.Is(err, engine.ErrUnknownGenerator) || !errors.Is(err, engine.ErrSegmentExhausted) ||
			errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not served here") {
			t.Fatalf("NextID on a refused sequence: %v; want the refusal at once, not after MaxWait", err)
		}
		failures := c.Stats().Failures
		clk.Advance(time.Second)
		eventually(t, "the worker asks again", func() bool { return c.Stats().Failures > failures })
	}
	if got := logs.count(slog.LevelError, "refuses the sequence"); got != 1 || len(logs.lines()) != 1 {
		t.Errorf("25 draws and %d refusals over 25 s logged %q; want the refusal once", c.Stats().Failures, logs.lines())
	}
	accept.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eventually(t, "IDs flow once the store accepts the sequence", func() bool {
		_, err := c.NextID(ctx)
		return err == nil
	})
	eventually(t, "the worker says the store serves the sequence", func() bool { return logs.count(slog.LevelInfo, "serves the sequence again") == 1 })
}

// logCounter is a slog.Handler keeping every record, to count them.
type logCounter struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
	return nil
}

// count returns how many records of level hold msg in their message.
func (l *logCounter) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

func (l *logCounter) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}

// A store outage is logged once when it starts, summarised at most every
// 10 s of the chain's clock, and once with its length when it ends,
// however many retries it took. The clock is a fake moved one second per
// failed retry: the counts do not hang on the machine's speed.
func TestChainOutageLogging(t *testing.T) {
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	f := segtest.NewFake(0)
	logs := &logCounter{}
	c := newChain(t, f, segment.Settings{Step: 10}, chain.Owned{Clock: clk, Logger: slog.New(logs), PrefetchPeriod: time.Millisecond})
	if _, err := c.NextID(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.SetDown(true)
	failures := c.Stats().Failures
	// Drain the chain, so that the worker wants to fetch: from then on it
	// retries every period (1 ms of real time).
	eventually(t, "the worker finds the store down", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, _ = c.NextID(ctx)
		return c.Stats().Failures > failures
	})
	began := clk.Now()
	for range 25 {
		failures := c.Stats().Failures
		clk.Advance(time.Second)
		eventually(t, "the worker retries", func() bool { return c.Stats().Failures > failures })
	}
	f.SetDown(false)
	eventually(t, "the worker recovers", func() bool { return c.Stats().LastError == nil })
	warn := logs.count(slog.LevelWarn, "store failed")
	still := logs.count(slog.LevelWarn, "store still failing")
	ends := logs.count(slog.LevelInfo, "store answered again")
	// The recovery came between 25 and 26 s after the start, on the fake
	// clock: two summaries, at 10 and 20 s.
	if warn != 1 || still != 2 || ends != 1 {
		t.Fatalf("%d failed retries over 25 s logged %q; want one start, 2 summaries, one end",
			c.Stats().Failures-failures, logs.lines())
	}
	logs.mu.Lock()
	var length time.Duration
	for _, r := range logs.recs {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "outage" {
				length = a.Value.Duration()
			}
			return true
		})
	}
	logs.mu.Unlock()
	if want := clk.Now().Sub(began); length != want {
		t.Errorf("the end line says the outage lasted %v, want %v", length, want)
	}
}

func TestChainMaxWait(t *testing.T) {
	f := segtest.NewFake(0)
	f.SetDown(true)
	c := newChain(t, f, segment.Settings{MaxWait: 20 * time.Millisecond})
	_, err := c.NextID(context.Background())
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "MaxWait 20ms") {
		t.Fatalf("NextID on a dry chain without a deadline: %v; want exhausted after MaxWait 20ms", err)
	}
}

func TestChainHungerWidensAndFeedingNarrows(t *testing.T) {
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	f := slowFake(2 * time.Millisecond)
	c := newChain(t, f, segment.Settings{Step: 10, SafeDistance: 1}, chain.Owned{Clock: clk, MaxPrefetchDistance: 64, PrefetchPeriod: time.Millisecond, HungerWindow: time.Minute})
	ctx := context.Background()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first fetch", func() bool { return c.Stats().Fetches > 0 })
	if d := c.Stats().PrefetchDistance; d != 1 {
		t.Fatalf("PrefetchDistance %d before anyone starved, want the safe distance 1", d)
	}
	// 10 IDs per 2 ms fetch cannot feed a tight loop: callers starve.
	for range 500 {
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.Stats().Hungry == 0 {
		t.Fatal("nobody was hungry")
	}
	eventually(t, "the distance widens", func() bool { return c.Stats().PrefetchDistance > 1 })
	// Nobody draws any more: once the hunger window passes, the distance
	// halves once per period back to the safe distance.
	widest := c.Stats().PrefetchDistance
	clk.Advance(2 * time.Minute)
	var seen []int64
	eventually(t, "the distance narrows to the safe distance", func() bool {
		clk.Advance(time.Millisecond)
		d := c.Stats().PrefetchDistance
		if len(seen) == 0 || seen[len(seen)-1] != d {
			seen = append(seen, d)
		}
		return d == 1
	})
	// Between two samples the clock moved one period, and the worker may
	// have acted once at the earlier reading (after the sample) and once at
	// the later one: at most two halvings, never a collapse.
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1]/4 {
			t.Fatalf("distance went %v: more than halved per period (widest %d)", seen, widest)
		}
	}
}

func TestChainTTL(t *testing.T) {
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	f := segtest.NewFake(0)
	c := newChain(t, f, segment.Settings{Step: 10, SafeDistance: 2, TTL: time.Hour}, chain.Owned{Clock: clk, PrefetchPeriod: time.Millisecond})
	ctx := context.Background()
	for want := int64(1); want <= 2; want++ {
		if id, err := c.NextID(ctx); err != nil || id != want {
			t.Fatalf("NextID = %d, %v; want %d", id, err, want)
		}
	}
	eventually(t, "the chain holds its safe distance", func() bool { return c.Stats().Ahead >= 20 })
	held := f.Max()
	clk.Advance(59 * time.Minute)
	if id, err := c.NextID(ctx); err != nil || id != 3 {
		t.Fatalf("before the TTL: NextID = %d, %v; want 3", id, err)
	}
	clk.Advance(2 * time.Minute)
	eventually(t, "expired segments are discarded and replaced", func() bool {
		s := c.Stats()
		return s.Discarded > 0 && s.Ahead >= 20
	})
	id, err := c.NextID(ctx)
	if err != nil || id <= held {
		t.Fatalf("after the TTL: NextID = %d, %v; want an ID from a fresh segment above %d", id, err, held)
	}
	if s := c.Stats(); s.Discarded != held-3 || s.Issued != 4 {
		t.Fatalf("Stats after the TTL: Discarded %d, Issued %d; want %d, 4", s.Discarded, s.Issued, held-3)
	}
}

func TestChainRefusesBadRanges(t *testing.T) {
	var mu sync.Mutex
	var cur, calls int64
	d := distFunc(func(ctx context.Context, step int64) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 2: // the previous range again
			return cur, nil
		case 3: // overlaps the previous range by one
			return cur + step - 1, nil
		}
		cur += step
		return cur, nil
	})
	c := newChain(t, d, segment.Settings{Step: 4, SafeDistance: 1}, chain.Owned{PrefetchPeriod: time.Millisecond})
	ids := draw(t, c, 1, 100)
	distinct(t, ids...)
	if s := c.Stats(); s.Failures != 2 {
		t.Fatalf("Failures %d, want the 2 bad ranges", s.Failures)
	}
}

func TestRangeBelowOne(t *testing.T) {
	d := distFunc(func(ctx context.Context, step int64) (int64, error) { return step - 1, nil })
	g, err := chain.NewPlainSingle(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(context.Background()); !errors.Is(err, chain.ErrInvalidRange) || !errors.Is(err, engine.ErrSegmentExhausted) {
		t.Fatalf("range holding ID 0: %v; want ErrInvalidRange and ErrSegmentExhausted", err)
	}
}

func TestChainCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := context.Background()
	for range 8 {
		c, err := chain.New(slowFake(time.Millisecond), segment.Settings{}, chain.Owned{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Close wakes a caller waiting on a dry chain, and cancels a fetch in flight.
	f := slowFake(time.Hour)
	c, err := chain.New(f, segment.Settings{MaxWait: -1}, chain.Owned{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error)
	go func() {
		_, err := c.NextID(ctx)
		waiting <- err
	}()
	eventually(t, "the caller waits", func() bool { return c.Stats().Hungry > 0 && f.Calls() > 0 })
	c.Close()
	select {
	case err := <-waiting:
		if !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("caller waiting during Close: %v, want engine.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a caller waiting on a dry chain is still waiting after Close")
	}
	if _, err := c.NextID(ctx); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("NextID after Close: %v, want engine.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestChainCloseDiscardsWhatItHeld(t *testing.T) {
	c := newChain(t, segtest.NewFake(0), segment.Settings{Step: 10})
	if _, err := c.NextID(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chain holds its safe distance", func() bool { return c.Stats().Ahead >= 20 })
	c.Close()
	if s := c.Stats(); s.Ahead != 0 || s.Issued != 1 || s.Discarded < 19 {
		t.Fatalf("Stats after Close: %+v; want nothing ahead, 1 issued, the rest discarded", s)
	}
}

func TestChainFastPathAllocatesNothing(t *testing.T) {
	c := newChain(t, segtest.NewFake(0), segment.Settings{Step: 1 << 20}, chain.Owned{PrefetchPeriod: time.Hour})
	ctx := context.Background()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chain holds its safe distance", func() bool { return c.Stats().Ahead >= 2<<20-1 })
	if a := testing.AllocsPerRun(10_000, func() { c.NextID(ctx) }); a != 0 {
		t.Fatalf("NextID allocates %v times per call", a)
	}
}

func TestInvalidSettings(t *testing.T) {
	f := segtest.NewFake(0)
	for _, tc := range []struct {
		want string
		d    segment.Distributor
		opts segment.Settings
		own  chain.Owned // test-only tuning
	}{
		{"nil Distributor", nil, segment.Settings{}, chain.Owned{}},
		{"Step -5", f, segment.Settings{Step: -5}, chain.Owned{}},
		{"SafeDistance -1", f, segment.Settings{SafeDistance: -1}, chain.Owned{}},
		{"MaxPrefetchDistance 3", f, segment.Settings{SafeDistance: 4}, chain.Owned{MaxPrefetchDistance: 3}},
		{"overflows int64", f, segment.Settings{Step: 1 << 32}, chain.Owned{MaxPrefetchDistance: 1 << 31}},
		{"Step 4294967297", f, segment.Settings{Step: 1<<32 + 1}, chain.Owned{}},
		{"Step 9223372036854775807", f, segment.Settings{Step: math.MaxInt64}, chain.Owned{}},
		{"SafeDistance 268435457", f, segment.Settings{SafeDistance: 1<<28 + 1}, chain.Owned{}},
		{"SafeDistance 9223372036854775807", f, segment.Settings{SafeDistance: math.MaxInt64}, chain.Owned{}},
		{"TTL 2562047h47m16.854775807s", f, segment.Settings{TTL: math.MaxInt64}, chain.Owned{}},
		{"Ahead 2562047h47m16.854775807s", f, segment.Settings{Ahead: math.MaxInt64}, chain.Owned{}},
		{"Fence 2562047h47m16.854775807s", f, segment.Settings{Fence: math.MaxInt64}, chain.Owned{}},
		{"MaxWait 2562047h47m16.854775807s", f, segment.Settings{MaxWait: math.MaxInt64}, chain.Owned{}},
		{"Fence -1s", f, segment.Settings{Fence: -time.Second}, chain.Owned{}},
		{"PrefetchPeriod -1s", f, segment.Settings{}, chain.Owned{PrefetchPeriod: -time.Second}},
		{"HungerWindow -1s", f, segment.Settings{}, chain.Owned{HungerWindow: -time.Second}},
		{"TTL -1s", f, segment.Settings{TTL: -time.Second}, chain.Owned{}},
		{"FetchTimeout -1s", f, segment.Settings{}, chain.Owned{FetchTimeout: -time.Second}},
		{"Ahead -1s", f, segment.Settings{Ahead: -time.Second}, chain.Owned{}},
		{"Ahead 2s: beyond Fence 1s", f, segment.Settings{Ahead: 2 * time.Second, Fence: time.Second}, chain.Owned{}},
	} {
		build := chain.NewPlain
		if tc.own != (chain.Owned{}) {
			build = func(d segment.Distributor, s ...segment.Settings) (*chain.Chain, error) {
				return chain.New(d, s[0], tc.own)
			}
		}
		c, err := build(tc.d, tc.opts)
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewChain with %s: %v; want engine.ErrInvalidConfig naming it", tc.want, err)
		}
		if _, err := chain.NewSingle(tc.d, tc.opts, tc.own); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("New with %s: %v; want engine.ErrInvalidConfig", tc.want, err)
		}
	}
	// A safe distance above the default cap raises the cap instead of failing.
	if _, err := chain.NewPlainSingle(f, segment.Settings{SafeDistance: 2 * 1_000_000}); err != nil {
		t.Errorf("safe distance above the default cap: %v", err)
	}
}

// distFunc adapts a function to segment.Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
