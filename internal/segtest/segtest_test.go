package segtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/internal/segtest"
)

// fakes hands out one Fake per name, shared by every caller of that name.
func fakes(start int64) func(t *testing.T, name string) segment.Distributor {
	var mu sync.Mutex
	m := map[string]*segtest.Fake{}
	return func(t *testing.T, name string) segment.Distributor {
		mu.Lock()
		defer mu.Unlock()
		if m[name] == nil {
			m[name] = segtest.NewFake(start)
		}
		return m[name]
	}
}

func TestRunFake(t *testing.T) {
	segmenttest.Run(t, segmenttest.Suite{Segments: fakes(0)})
}

func TestRunFakeStart(t *testing.T) {
	segmenttest.Run(t, segmenttest.Suite{Segments: fakes(1_000_000), Start: 1_000_000})
}

func TestFakeDownAndLatency(t *testing.T) {
	f := segtest.NewFake(10)
	f.SetLatency(time.Millisecond)
	ctx := context.Background()
	f.SetDown(true)
	if _, err := f.NextMaxID(ctx, 5); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("down: err = %v, want engine.ErrStoreUnavailable", err)
	}
	f.SetDown(false)
	if max, err := f.NextMaxID(ctx, 5); err != nil || max != 15 {
		t.Fatalf("up again: %d, %v; want 15 (the failed call takes nothing)", max, err)
	}
	f.SetLatency(time.Hour)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := f.NextMaxID(tctx, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow store with a deadline: err = %v, want context.DeadlineExceeded", err)
	}
	if f.Calls() != 3 || f.Max() != 15 {
		t.Fatalf("Calls, Max = %d, %d; want 3, 15", f.Calls(), f.Max())
	}
}

func ExampleFake() {
	f := segtest.NewFake(100)
	ctx := context.Background()
	max, _ := f.NextMaxID(ctx, 10)
	fmt.Println("first range:", max-10, max)
	f.SetDown(true)
	_, err := f.NextMaxID(ctx, 10)
	fmt.Println(errors.Is(err, engine.ErrStoreUnavailable))
	// Output:
	// first range: 100 110
	// true
}
