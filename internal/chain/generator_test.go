package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

func TestGeneratorSequential(t *testing.T) {
	f := segtest.NewFake(500)
	g, err := chain.NewPlainSingle(f, segment.Settings{Step: 4})
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(501); want <= 520; want++ {
		if id, err := g.NextID(context.Background()); err != nil || id != want {
			t.Fatalf("NextID = %d, %v; want %d", id, err, want)
		}
	}
	if f.Calls() != 5 {
		t.Fatalf("%d store calls for 20 IDs of step 4, want 5", f.Calls())
	}
}

// One refill at a time: 16 goroutines drawing 80,000 IDs cost exactly
// 80,000/step store calls, so no range is fetched and thrown away.
func TestGeneratorConcurrentOneFetchAtATime(t *testing.T) {
	const goroutines, n, step = 16, 5000, 100
	f := slowFake(50 * time.Microsecond)
	g, err := chain.NewPlainSingle(f, segment.Settings{Step: step})
	if err != nil {
		t.Fatal(err)
	}
	all := distinct(t, draw(t, g, goroutines, n)...)
	if all[0] != 1 || all[len(all)-1] != goroutines*n {
		t.Fatalf("IDs run from %d to %d, want 1 to %d with no gaps", all[0], all[len(all)-1], goroutines*n)
	}
	if want := int64(goroutines * n / step); f.Calls() != want {
		t.Fatalf("%d store calls, want %d", f.Calls(), want)
	}
}

func TestGeneratorStoreDown(t *testing.T) {
	f := segtest.NewFake(0)
	g, err := chain.NewSingle(f, segment.Settings{Step: 2}, chain.Owned{Name: "invoice"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for want := int64(1); want <= 2; want++ {
		if id, err := g.NextID(ctx); err != nil || id != want {
			t.Fatalf("NextID = %d, %v; want %d", id, err, want)
		}
	}
	f.SetDown(true)
	_, err = g.NextID(ctx)
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, engine.ErrStoreUnavailable) ||
		!strings.Contains(err.Error(), `"invoice"`) || !strings.Contains(err.Error(), "fake store is down") {
		t.Fatalf("refill with the store down: %v", err)
	}
	f.SetDown(false)
	if id, err := g.NextID(ctx); err != nil || id != 3 {
		t.Fatalf("after the store came back: %d, %v; want 3", id, err)
	}
}

// A caller waiting for another caller's slow refill gives up when its ctx ends.
func TestGeneratorWaitHonoursContext(t *testing.T) {
	f := slowFake(time.Hour)
	g, err := chain.NewPlainSingle(f)
	if err != nil {
		t.Fatal(err)
	}
	fetching, cancelFetch := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := g.NextID(fetching)
		done <- err
	}()
	eventually(t, "the first caller fetches", func() bool { return f.Calls() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.NextID(ctx); !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a slow refill: %v; want exhausted after the deadline", err)
	}
	if f.Calls() != 1 {
		t.Fatalf("the waiting caller called the store too (%d calls)", f.Calls())
	}
	cancelFetch()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("fetching caller after cancel: %v", err)
	}
}

func TestExhaustedErrorMessages(t *testing.T) {
	store := errors.New("connection refused")
	for _, tc := range []struct {
		err  chain.ExhaustedError
		want string
	}{
		{chain.ExhaustedError{Name: "order", Waited: time.Second, Store: store, Cause: context.DeadlineExceeded},
			`idforge: segment exhausted ("order"): no ID ready after 1s: context deadline exceeded; last store error: connection refused`},
		{chain.ExhaustedError{Waited: time.Second, Cause: context.Canceled},
			`idforge: segment exhausted: no ID ready after 1s: context canceled; the store has not failed, it is slow to answer`},
		{chain.ExhaustedError{Store: store},
			`idforge: segment exhausted: refill failed: connection refused`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\n want %q", got, tc.want)
		}
		if !errors.Is(&tc.err, engine.ErrSegmentExhausted) {
			t.Errorf("%q does not match engine.ErrSegmentExhausted", tc.want)
		}
	}
}

func TestNilContextDoesNotPanic(t *testing.T) {
	f := segtest.NewFake(0)
	g, err := chain.NewPlainSingle(f, segment.Settings{Step: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.NewPlain(f, segment.Settings{Step: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A nil ctx, past a segment, so both wait on the store at least once.
	for range 5 {
		if _, err := g.NextID(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NextID(nil); err != nil {
			t.Fatal(err)
		}
	}
}

// The single-segment generator of the registry's "segment" kind serves its
// segment, then names the sequence and the store's failure when the refill
// fails.
func TestSingleRefillFails(t *testing.T) {
	store := segtest.NewFake(41)
	gen, err := chain.NewSingle(store, segment.Settings{Step: 2}, chain.Owned{Name: "invoice"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for want := int64(42); want <= 45; want++ {
		if id, err := gen.NextID(ctx); err != nil || id != want {
			t.Fatalf("NextID = %d, %v; want %d", id, err, want)
		}
	}
	// The segment (43, 45] is used up; the next ID needs the store.
	store.SetDown(true)
	_, err = gen.NextID(ctx)
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("refill with the store down: %v; want ErrSegmentExhausted and ErrStoreUnavailable", err)
	}
	const want = `idforge: segment exhausted ("invoice"): refill failed: fetch of 2 IDs: idforge: store unavailable: segtest: fake store is down`
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}
