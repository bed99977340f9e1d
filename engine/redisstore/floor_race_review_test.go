package redisstore_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/internal/testdb"
)

// TestFloorRaceWithWipes: three store values, four goroutines each, fetch
// one name while the keys are wiped now and then; Floor answers the largest
// max handed out so far (the rows written). No range may overlap another.
func TestFloorRaceWithWipes(t *testing.T) {
	t.Run("all keys", func(t *testing.T) { floorRace(t, false) })
	t.Run("epoch key only", func(t *testing.T) { floorRace(t, true) })
}

func floorRace(t *testing.T, epochOnly bool) {
	c, prefix := testdb.Redis(t)
	ctx := t.Context()
	var high atomic.Int64
	var floorCalls atomic.Int64
	floor := func(ctx context.Context, name string) (int64, error) {
		floorCalls.Add(1)
		time.Sleep(time.Millisecond) // a query
		return high.Load(), nil
	}
	type rng struct{ lo, hi int64 }
	var mu sync.Mutex
	var got []rng
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var resets, fails atomic.Int64
	for i := range 3 {
		s, err := redisstore.Open(ctx, c, redisstore.WithPrefix(prefix), redisstore.WithResetGrace(300*time.Millisecond), redisstore.WithFloor(floor))
		if err != nil {
			t.Fatal(err)
		}
		seg, _ := s.Segment("order")
		for g := range 4 {
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
	epochKey := prefix + "{idforge}:epoch"
	for range 4 {
		time.Sleep(700 * time.Millisecond)
		if epochOnly {
			if err := c.Del(ctx, epochKey).Err(); err != nil {
				t.Fatal(err)
			}
		} else if _, err := testdb.DeleteRedisKeys(ctx, c, prefix); err != nil {
			t.Fatal(err)
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
	t.Logf("%d ranges, %d resets seen, %d other failures, Floor asked %d times", len(got), resets.Load(), fails.Load(), floorCalls.Load())
}
