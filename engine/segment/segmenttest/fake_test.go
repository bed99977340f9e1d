package segmenttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
)

// fakes hands out one Fake per name, shared by every caller of that name.
func fakes(start int64) func(t *testing.T, name string) segment.Distributor {
	var mu sync.Mutex
	m := map[string]*segmenttest.Fake{}
	return func(t *testing.T, name string) segment.Distributor {
		mu.Lock()
		defer mu.Unlock()
		if m[name] == nil {
			m[name] = segmenttest.NewFake(start)
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
	f := segmenttest.NewFake(10)
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

// broken distributors, each breaking one rule of the contract.
var broken = map[string]func(cur *int64, step int64) (int64, error){
	// Every range overlaps the previous one by one ID.
	"overlap": func(cur *int64, step int64) (int64, error) { *cur += step - 1; return *cur, nil },
	// Accepts a step of 0 or less.
	"step": func(cur *int64, step int64) (int64, error) { *cur += max(step, 0); return *cur, nil },
}

// The suite must fail a distributor that breaks the contract. Run calls
// t.Fatal, so it runs in a child process of this test binary.
func TestRunCatchesBrokenDistributors(t *testing.T) {
	if kind := os.Getenv("SEGMENTTEST_BROKEN"); kind != "" {
		next := broken[kind]
		var mu sync.Mutex
		seqs := map[string]*int64{}
		segmenttest.Run(t, segmenttest.Suite{Segments: func(t *testing.T, name string) segment.Distributor {
			mu.Lock()
			defer mu.Unlock()
			if seqs[name] == nil {
				seqs[name] = new(int64)
			}
			cur := seqs[name]
			return distFunc(func(ctx context.Context, step int64) (int64, error) {
				mu.Lock()
				defer mu.Unlock()
				return next(cur, step)
			})
		}})
		return
	}
	for kind, want := range map[string]string{
		"overlap": "ranges overlap or leave a gap",
		"step":    "want an error wrapping engine.ErrInvalidConfig",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesBrokenDistributors$")
		cmd.Env = append(os.Environ(), "SEGMENTTEST_BROKEN="+kind)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the suite passed a broken distributor", kind)
		} else if !strings.Contains(string(out), want) {
			t.Errorf("%s: the suite failed without saying %q:\n%s", kind, want, out)
		}
	}
}

func ExampleFake() {
	f := segmenttest.NewFake(100)
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

// distFunc adapts a function to segment.Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
