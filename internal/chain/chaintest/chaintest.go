// Package chaintest checks chains on a store's sequences: the store's
// tests run it beside segmenttest.Run, which checks the distributor alone.
package chaintest

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
)

// names keeps sequence names unique across Run calls sharing a store.
var names atomic.Int64

// Run checks that two chains drawing from one sequence of a store hand out
// distinct IDs, each chain's strictly increasing, all above start, where the
// store's distributors for name come from newDistributor (as in
// segmenttest.Run) and name is new to the store.
func Run(t *testing.T, newDistributor func(t *testing.T, name string) segment.Distributor, start int64) {
	t.Helper()
	t.Run("Chains", func(t *testing.T) { chains(t, newDistributor, start) })
}

func chains(t *testing.T, newDistributor func(t *testing.T, name string) segment.Distributor, start int64) {
	const chains, goroutines, perGoroutine = 2, 4, 2000
	ctx := t.Context()
	name := fmt.Sprintf("chains-%s-%d", strconv.FormatInt(time.Now().UnixNano(), 36), names.Add(1))
	ids := make([][]int64, chains*goroutines)
	var wg sync.WaitGroup
	for c := range chains {
		// A short prefetch period (test-only tuning) keeps the chains busy
		// fetching, so their ranges interleave.
		ch, err := chain.New(newDistributor(t, name), segment.Settings{Step: 50}, chain.Owned{PrefetchPeriod: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		for g := range goroutines {
			wg.Go(func() {
				out := make([]int64, 0, perGoroutine)
				for range perGoroutine {
					id, err := ch.NextID(ctx)
					if err != nil {
						t.Errorf("chain %d: NextID: %v", c, err)
						return
					}
					if len(out) > 0 && id <= out[len(out)-1] {
						t.Errorf("chain %d: ID %d after %d: not increasing", c, id, out[len(out)-1])
						return
					}
					out = append(out, id)
				}
				ids[c*goroutines+g] = out
			})
		}
	}
	wg.Wait()
	all := slices.Concat(ids...)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	if len(all) > 0 && all[0] <= start {
		t.Fatalf("ID %d is not above the start %d", all[0], start)
	}
}
