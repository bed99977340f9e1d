package segmenttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// RunOption configures [Run].
type RunOption func(*suite)

// ExpectStart tells the suite where a fresh sequence starts: the store under
// test was built with this start (default 0).
func ExpectStart(n int64) RunOption { return func(s *suite) { s.start = n } }

type suite struct {
	start int64
	new   func(t *testing.T, name string) segment.Distributor
}

// names keeps sequence names unique across Run calls sharing a store.
var names atomic.Int64

func (s *suite) name(label string) string {
	return fmt.Sprintf("st-%s-%s-%d", label, strconv.FormatInt(time.Now().UnixNano(), 36), names.Add(1))
}

// Run checks a [segment.Distributor] implementation against the contract.
// newDistributor returns a distributor for the named sequence; it may be
// called several times with one name, and distributors for the same name must
// share the sequence, as instances sharing a store do. Every name Run asks
// for is new: the sequence must not exist yet in the store.
//
// The contract checked:
//   - A fresh name starts at the store's configured start (see
//     [ExpectStart]): its first range for step s is (start, start+s], and
//     each call continues where the previous one ended.
//   - Ranges handed to concurrent callers (16 goroutines × 200 calls with
//     varied steps, through several distributors for the name) never
//     overlap and cover the sequence contiguously.
//   - Names are independent sequences.
//   - Steps beyond 32 bits work.
//   - A step <= 0 fails with an error wrapping engine.ErrInvalidConfig and
//     takes nothing from the sequence.
//   - A cancelled ctx fails with an error wrapping context.Canceled, and
//     later ranges still never overlap earlier ones.
func Run(t *testing.T, newDistributor func(t *testing.T, name string) segment.Distributor, opts ...RunOption) {
	t.Helper()
	s := &suite{new: newDistributor}
	for _, o := range opts {
		o(s)
	}
	t.Run("FirstRange", s.firstRange)
	t.Run("Concurrent", s.concurrent)
	t.Run("IndependentNames", s.independentNames)
	t.Run("LargeStep", s.largeStep)
	t.Run("InvalidStep", s.invalidStep)
	t.Run("CancelledContext", s.cancelled)
}

// testContext is the context of a case: cancelled when it ends, with no
// deadline of its own. A store on a loaded machine (two cores, the race
// detector, SQLite committing every fetch) may take minutes for the
// concurrent case; the suite asserts no wall-clock time, `go test -timeout`
// bounds a hang.
func testContext(t *testing.T) context.Context { return t.Context() }

// expect calls d.NextMaxID(step) and fails unless it returns want.
func expect(t *testing.T, ctx context.Context, d segment.Distributor, step, want int64) {
	t.Helper()
	got, err := d.NextMaxID(ctx, step)
	if err != nil {
		t.Fatalf("NextMaxID(%d): %v", step, err)
	}
	if got != want {
		t.Fatalf("NextMaxID(%d) = %d, want %d", step, got, want)
	}
}

func (s *suite) firstRange(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("first"))
	expect(t, ctx, d, 7, s.start+7)
	expect(t, ctx, d, 5, s.start+12)
	expect(t, ctx, d, 1, s.start+13)
}

func (s *suite) concurrent(t *testing.T) {
	const goroutines, calls = 16, 200
	ctx := testContext(t)
	name := s.name("concurrent")
	// Four distributors for the name, as four instances would have.
	ds := make([]segment.Distributor, 4)
	for i := range ds {
		ds[i] = s.new(t, name)
	}
	type rng struct{ lo, hi int64 }
	got := make([][]rng, goroutines)
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			d := ds[g%len(ds)]
			for i := range calls {
				step := int64(1 + (g*31+i*7)%64)
				max, err := d.NextMaxID(ctx, step)
				if err != nil {
					t.Errorf("goroutine %d call %d: NextMaxID(%d): %v", g, i, step, err)
					return
				}
				got[g] = append(got[g], rng{max - step, max})
				total.Add(step)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	all := slices.Concat(got...)
	slices.SortFunc(all, func(a, b rng) int { return cmp.Compare(a.hi, b.hi) })
	prev := s.start
	for _, r := range all {
		if r.lo != prev {
			t.Fatalf("range (%d, %d] follows a range ending at %d: ranges overlap or leave a gap", r.lo, r.hi, prev)
		}
		prev = r.hi
	}
	if want := s.start + total.Load(); prev != want {
		t.Fatalf("ranges end at %d, want start %d + %d IDs = %d", prev, s.start, total.Load(), want)
	}
}

func (s *suite) independentNames(t *testing.T) {
	ctx := testContext(t)
	a, b := s.new(t, s.name("a")), s.new(t, s.name("b"))
	expect(t, ctx, a, 3, s.start+3)
	expect(t, ctx, a, 3, s.start+6)
	expect(t, ctx, b, 4, s.start+4)
	expect(t, ctx, a, 3, s.start+9)
	expect(t, ctx, b, 4, s.start+8)
}

func (s *suite) largeStep(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("large"))
	const big = 1 << 40
	expect(t, ctx, d, big, s.start+big)
	expect(t, ctx, d, 1, s.start+big+1)
}

func (s *suite) invalidStep(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("invalid"))
	expect(t, ctx, d, 2, s.start+2)
	for _, step := range []int64{0, -1, -1000} {
		if max, err := d.NextMaxID(ctx, step); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("NextMaxID(%d) = %d, %v; want an error wrapping engine.ErrInvalidConfig", step, max, err)
		}
	}
	expect(t, ctx, d, 2, s.start+4)
}

func (s *suite) cancelled(t *testing.T) {
	d := s.new(t, s.name("cancel"))
	expect(t, testContext(t), d, 4, s.start+4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if max, err := d.NextMaxID(ctx, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("NextMaxID with a cancelled ctx = %d, %v; want an error wrapping context.Canceled", max, err)
	}
	max, err := d.NextMaxID(testContext(t), 4)
	if err != nil {
		t.Fatalf("NextMaxID after the cancelled call: %v", err)
	}
	if max-4 < s.start+4 {
		t.Fatalf("range (%d, %d] after the cancelled call overlaps (%d, %d]", max-4, max, s.start, s.start+4)
	}
}
