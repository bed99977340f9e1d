package segmenttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/segcheck"
	"github.com/idforge/idforge/engine/segment"
)

// opener is [Suite].Open and [Suite].RaceOpen.
type opener = func(t *testing.T, floor func(ctx context.Context, name string) (int64, error)) func(name string) segment.Distributor

// checkFloor checks the Floor part of [Run] (see there) on a store empty when
// it starts.
func checkFloor(t *testing.T, open opener, wipe func(t *testing.T, epochOnly bool)) {
	ctx := testContext(t)
	var mu sync.Mutex
	data := map[string]int64{"order": 41_000} // MAX(id) of each sequence's table
	calls := map[string]int{}
	floor := func(_ context.Context, name string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[name]++
		return data[name], nil
	}
	write := func(name string, maxID int64) {
		mu.Lock()
		defer mu.Unlock()
		data[name] = maxID
	}
	called := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[name]
	}

	a := open(t, floor)
	order := a("order")
	expect(t, ctx, order, 100, 41_100)
	expect(t, ctx, order, 100, 41_200)
	if n := called("order"); n != 1 {
		t.Errorf("Settings.Floor was asked %d times for two fetches; want once, when the counter is created", n)
	}
	expect(t, ctx, a("empty"), 100, 100)
	write("order", 41_150) // rows up to 41,150 reached the table; A then stops

	wipe(t, false)
	b := open(t, floor)("order")
	got, err := b.NextMaxID(ctx, 100)
	if err != nil {
		t.Fatalf("first fetch of a new process after the wipe: %v", err)
	}
	if got-100 < 41_150 {
		t.Fatalf("after the wipe a new process got (%d, %d]: IDs up to 41,150 are in the table already", got-100, got)
	}

	write("order", 90_000) // other processes wrote IDs A never saw
	wipe(t, false)
	// A is still live: its next fetch sees the reset and re-seeds.
	segcheck.ExpectAbove(t, order, 100, 90_000, "a live process after the wipe, whose re-seed must read the data's floor")

	// Two new store values, the lower answer first: the higher one must
	// still be above its own answer.
	expect(t, ctx, open(t, func(context.Context, string) (int64, error) { return 100, nil })("race"), 10, 110)
	if got, err := open(t, func(context.Context, string) (int64, error) { return 5_000, nil })("race").NextMaxID(ctx, 10); err != nil || got-10 < 5_000 {
		t.Errorf("a store value whose floor says 5,000 got (%d, %d], %v, after one whose floor said 100 created the counter", got-10, got, err)
	}

	// A live process whose floor fails while it re-seeds after a wipe.
	var failing sync.Mutex
	fail := false
	flaky := func(ctx context.Context, name string) (int64, error) {
		failing.Lock()
		defer failing.Unlock()
		if fail {
			return 0, errors.New("orders table locked")
		}
		return floor(ctx, name)
	}
	live := open(t, flaky)("live")
	write("live", 1_000)
	expect(t, ctx, live, 100, 1_100) // handed out 1,001..1,100; say rows up to 1,050 are committed
	write("live", 1_050)
	failing.Lock()
	fail = true
	failing.Unlock()
	wipe(t, false)
	for range 3 { // the reset, its re-seed, and the fetch whose floor fails
		if _, err := live.NextMaxID(ctx, 100); err == nil {
			t.Fatal("a fetch whose floor fails succeeded")
		}
	}
	if got, err := open(t, floor)("live").NextMaxID(ctx, 100); err != nil || got-100 < 1_100 {
		t.Errorf("a new process got (%d, %d], %v: the live process, whose floor failed, had handed out up to 1,100", got-100, got, err)
	}

	// A floor at the top of the int64 range: an overflow error, never a
	// wrap to negative IDs.
	top := open(t, func(context.Context, string) (int64, error) { return math.MaxInt64 - 150, nil })("top")
	expect(t, ctx, top, 100, math.MaxInt64-50)
	if got, err := top.NextMaxID(ctx, 100); !errors.Is(err, engine.ErrIDOverflow) {
		t.Errorf("past the largest int64: %d, %v; want ErrIDOverflow", got, err)
	}

	down := open(t, func(context.Context, string) (int64, error) { return 0, errors.New("connection refused") })
	if _, err := down("fresh-down").NextMaxID(ctx, 10); !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "Floor(") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a failing floor: %v; want ErrStoreUnavailable naming the Floor and the cause", err)
	}
	panicky := open(t, func(context.Context, string) (int64, error) { panic("nil map") })
	if _, err := panicky("fresh-panic").NextMaxID(ctx, 10); !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "Floor(") || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("a panicking floor: %v; want ErrStoreUnavailable naming the Floor and the panic", err)
	}
	negative := open(t, func(context.Context, string) (int64, error) { return -5, nil })
	if _, err := negative("fresh-negative").NextMaxID(ctx, 10); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Floor(") {
		t.Errorf("a negative floor: %v; want ErrInvalidConfig naming the Floor", err)
	}
}

// checkFloorRace checks the FloorRace part of [Run] (see there), with
// wipes of the whole store and of its epoch alone.
func checkFloorRace(t *testing.T, open opener, wipe func(t *testing.T, epochOnly bool)) {
	for _, epochOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("epochOnly=%v", epochOnly), func(t *testing.T) { race(t, open, wipe, epochOnly) })
	}
}

func race(t *testing.T, open opener, wipe func(t *testing.T, epochOnly bool), epochOnly bool) {
	ctx := testContext(t)
	var high, asked, resets, unavailable atomic.Int64
	floor := func(context.Context, string) (int64, error) {
		asked.Add(1)
		return high.Load(), nil
	}
	var mu sync.Mutex
	var got [][2]int64 // (lo, hi]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		seg := open(t, floor)("race")
		for g := range 3 {
			step := int64(10 + 7*i + g)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					m, err := seg.NextMaxID(ctx, step)
					switch {
					case errors.Is(err, engine.ErrStoreReset):
						resets.Add(1)
						continue
					case errors.Is(err, engine.ErrStoreUnavailable):
						// A wipe's statements race the stores' own (MariaDB
						// may pick one as a deadlock victim): a chain fetches
						// again.
						if unavailable.Add(1) == 1 {
							t.Logf("fetch: %v", err)
						}
						continue
					case err != nil:
						t.Errorf("fetch: %v", err)
						return
					}
					for h := high.Load(); m > h && !high.CompareAndSwap(h, m); h = high.Load() {
					}
					mu.Lock()
					got = append(got, [2]int64{m - step, m})
					mu.Unlock()
				}
			})
		}
	}
	for range 4 {
		time.Sleep(700 * time.Millisecond)
		wipe(t, epochOnly)
	}
	time.Sleep(700 * time.Millisecond)
	close(stop)
	wg.Wait()
	slices.SortFunc(got, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for i := 1; i < len(got); i++ {
		if got[i][0] < got[i-1][1] {
			t.Errorf("ranges (%d, %d] and (%d, %d] overlap", got[i-1][0], got[i-1][1], got[i][0], got[i][1])
		}
	}
	if resets.Load() == 0 || len(got) < 100 {
		t.Errorf("%d ranges, %d resets seen: the race proves nothing", len(got), resets.Load())
	}
	t.Logf("%d ranges, %d resets seen, %d fetches failed with the store unavailable, Floor asked %d times",
		len(got), resets.Load(), unavailable.Load(), asked.Load())
}
