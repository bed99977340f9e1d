package sqlstore_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/testdb"
)

// TestFloorRaceWithWipes: three store values, three goroutines each, fetch
// one name while the tables (or idforge_meta only) are emptied now and
// then; Floor answers the largest max handed out so far. No range may
// overlap another.
func TestFloorRaceWithWipes(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		if d.Name == "sqlite" {
			t.Skip("one Store per SQLite file")
		}
		for _, metaOnly := range []bool{false, true} {
			admin := d.Open(t)
			ctx := t.Context()
			var high, floorCalls atomic.Int64
			floor := func(ctx context.Context, name string) (int64, error) {
				floorCalls.Add(1)
				return high.Load(), nil
			}
			type rng struct{ lo, hi int64 }
			var mu sync.Mutex
			var got []rng
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var resets, fails atomic.Int64
			name := testdb.UniqueName("race")
			for i := range 3 {
				seg, _ := openStore(t, d, sqlstore.WithResetGrace(300*time.Millisecond), sqlstore.WithFloor(floor)).Segment(name)
				for g := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						step := int64(10 + i*7 + g)
						for {
							select {
							case <-stop:
								return
							default:
							}
							m, err := seg.NextMaxID(ctx, step)
							if err != nil {
								if errors.Is(err, engine.ErrStoreReset) {
									resets.Add(1)
								} else {
									fails.Add(1)
									t.Log(err)
								}
								continue
							}
							for {
								h := high.Load()
								if m <= h || high.CompareAndSwap(h, m) {
									break
								}
							}
							mu.Lock()
							got = append(got, rng{m - step, m})
							mu.Unlock()
						}
					}()
				}
			}
			tables := []string{"idforge_segment", "idforge_machine", "idforge_meta"}
			if metaOnly {
				tables = tables[2:]
			}
			for range 4 {
				time.Sleep(700 * time.Millisecond)
				for _, table := range tables {
					if _, err := admin.ExecContext(ctx, "DELETE FROM "+table); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(700 * time.Millisecond)
			close(stop)
			wg.Wait()
			sort.Slice(got, func(i, j int) bool { return got[i].lo < got[j].lo })
			for i := 1; i < len(got); i++ {
				if got[i].lo < got[i-1].hi {
					t.Errorf("ranges (%d, %d] and (%d, %d] overlap", got[i-1].lo, got[i-1].hi, got[i].lo, got[i].hi)
				}
			}
			t.Logf("meta only %v: %d ranges, %d resets, %d other failures, Floor asked %d times", metaOnly, len(got), resets.Load(), fails.Load(), floorCalls.Load())
		}
	})
}
