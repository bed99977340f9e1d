package redisstore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/redisstore"
)

func TestSegmentStartsAtStartAndAdvancesByStep(t *testing.T) {
	ctx := context.Background()
	for _, start := range []int64{0, 1000} {
		s := newEnv(t, redisstore.WithStart(start)).store
		d := s.Segment("order")
		for i, step := range []int64{10, 1, 100} {
			want := start + []int64{10, 11, 111}[i]
			got, err := d.NextMaxID(ctx, step)
			if err != nil || got != want {
				t.Fatalf("start %d, fetch %d (step %d): got %d, %v; want %d", start, i, step, got, err, want)
			}
		}
		// Another name is another sequence.
		if got, err := s.Segment("user").NextMaxID(ctx, 5); err != nil || got != start+5 {
			t.Fatalf("start %d, fresh name: got %d, %v; want %d", start, got, err, start+5)
		}
	}
}

func TestSegmentStartAppliesOnlyToFreshNames(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if _, err := e.store.Segment("order").NextMaxID(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A process configured with another start joins the existing sequence
	// instead of restarting it, so the two cannot hand out the same range.
	late, err := redisstore.NewSegmentDistributor(e.client, "order", redisstore.WithPrefix(e.prefix), redisstore.WithStart(1000))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := late.NextMaxID(ctx, 10); err != nil || got != 20 {
		t.Fatalf("existing name with start 1000: got %d, %v; want 20", got, err)
	}
}

func TestSegmentConcurrentFetchesNeverOverlapAndCoverContiguously(t *testing.T) {
	ctx := context.Background()
	const (
		goroutines = 16
		fetches    = 40
		start      = 500
	)
	s := newEnv(t, redisstore.WithStart(start)).store
	type span struct{ lo, hi int64 } // (lo, hi]
	var (
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
		errs  = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Go(func() {
			// Each goroutine has its own distributor value and its own step,
			// like separate processes sharing the name.
			d := s.Segment("race")
			step := int64(1 + g%7)
			for range fetches {
				hi, err := d.NextMaxID(ctx, step)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				spans = append(spans, span{hi - step, hi})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(spans) != goroutines*fetches {
		t.Fatalf("got %d ranges, want %d", len(spans), goroutines*fetches)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.hi - b.hi) })
	next := int64(start)
	for _, sp := range spans {
		if sp.lo != next {
			t.Fatalf("range (%d, %d] should start at %d: gap or overlap", sp.lo, sp.hi, next)
		}
		next = sp.hi
	}
}

func TestSegmentFetchIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		start int64
		cmd   string
	}{{0, "incrby"}, {7, "eval"}} {
		e := newEnv(t, redisstore.WithStart(tc.start))
		d := e.store.Segment("trips")
		e.counter.take()
		for i := range 5 {
			if _, err := d.NextMaxID(ctx, 100); err != nil {
				t.Fatal(err)
			}
			if got := e.counter.take(); !slices.Equal(got, []string{tc.cmd}) {
				t.Fatalf("start %d, fetch %d sent %v, want exactly [%s]", tc.start, i, got, tc.cmd)
			}
		}
	}
}

func TestSegmentRejectsNonPositiveStep(t *testing.T) {
	d, err := redisstore.NewSegmentDistributor(deadClient(t), "order")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{0, -1} {
		if _, err := d.NextMaxID(context.Background(), step); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Fatalf("step %d: got %v, want ErrInvalidConfig", step, err)
		}
	}
}

func TestSegmentOverflowIsIDOverflow(t *testing.T) {
	ctx := context.Background()
	for _, start := range []int64{0, 7} {
		e := newEnv(t, redisstore.WithStart(start))
		d := e.store.Segment("full")
		if err := e.client.Set(ctx, d.Key(), math.MaxInt64-5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := d.NextMaxID(ctx, 10)
		if !errors.Is(err, engine.ErrIDOverflow) || !strings.Contains(err.Error(), d.Key()) {
			t.Fatalf("start %d: got %v, want ErrIDOverflow naming %s", start, err, d.Key())
		}
		// Nothing was consumed: a step that still fits succeeds.
		if got, err := d.NextMaxID(ctx, 5); err != nil || got != math.MaxInt64 {
			t.Fatalf("start %d: last fitting step: got %d, %v", start, got, err)
		}
	}
}

func TestSegmentStoreDownIsStoreUnavailable(t *testing.T) {
	for _, start := range []int64{0, 7} {
		d, err := redisstore.NewSegmentDistributor(deadClient(t), "order", redisstore.WithStart(start))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.NextMaxID(context.Background(), 10)
		if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "idforge:segment:order") {
			t.Fatalf("start %d: got %v, want ErrStoreUnavailable naming the key", start, err)
		}
	}
}

func TestSegmentHonoursContext(t *testing.T) {
	s := newEnv(t).store
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Segment("order").NextMaxID(ctx, 10)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("cancelled ctx: got %v, want context.Canceled wrapped in ErrStoreUnavailable", err)
	}
}
