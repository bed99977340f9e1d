package segmenttest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
)

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

// distFunc adapts a function to segment.Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
