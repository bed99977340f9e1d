package snowflake_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
)

// jitterClock reads the system clock minus up to jitter, independently
// on every read: successive reads go back and forth by up to jitter, so the
// generator keeps meeting small steps back (waited out) on all its paths.
type jitterClock struct{ jitter int64 }

func (c jitterClock) UnixNano() int64 { return time.Now().UnixNano() - rand.Int64N(c.jitter) }

func (c jitterClock) Now() time.Time { return time.Unix(0, c.UnixNano()) }

func (c jitterClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.System.Sleep(ctx, d)
}

// tickFence approves every tick and remembers which it approved.
type tickFence struct{ approved sync.Map }

func (f *tickFence) Check(unixMilli int64) error {
	f.approved.Store(unixMilli, struct{}{})
	return nil
}

// Many goroutines on a clock that jitters back and forth by 2 ms (waited out,
// MaxBackwards 20 ms): IDs must stay distinct, increase per goroutine, and
// carry only ticks the fence approved, on the add fast path, the CAS-only
// path and a layout that overflows its sequence all the time.
func TestStressJitteryClock(t *testing.T) {
	layouts := map[string]snowflake.Layout{
		"default":  snowflake.Default,
		"jssafe":   snowflake.JSSafe,                                                                                              // 512 per ms: overflow waits
		"cas-only": {Epoch: snowflake.Default.Epoch, TimestampBits: 50, MachineBits: 0, SequenceBits: 13, Unit: time.Millisecond}, // fewer than 2^20 spare
		"tiny-seq": {Epoch: snowflake.Default.Epoch, TimestampBits: 41, MachineBits: 10, SequenceBits: 2, Unit: time.Millisecond},
	}
	for name, l := range layouts {
		t.Run(name, func(t *testing.T) {
			fence := &tickFence{}
			g, err := snowflake.Resume(int64(1)<<l.MachineBits-1, snowflake.Settings{Layout: l, Clock: jitterClock{jitter: int64(2 * time.Millisecond)}, MaxBackwards: 20 * time.Millisecond},
				0, fence.Check)
			if err != nil {
				t.Fatal(err)
			}
			const goroutines = 8
			deadline := time.Now().Add(600 * time.Millisecond)
			all := make([][]int64, goroutines)
			var failed atomic.Bool
			var wg sync.WaitGroup
			for w := range all {
				wg.Go(func() {
					var ids []int64
					for time.Now().Before(deadline) && !failed.Load() {
						id, err := g.NextID(context.Background())
						if err != nil {
							if errors.Is(err, engine.ErrClockBackwards) {
								t.Errorf("jitter of 2ms with MaxBackwards 20ms: %v", err)
							} else {
								t.Error(err)
							}
							failed.Store(true)
							return
						}
						if n := len(ids); n > 0 && id <= ids[n-1] {
							t.Errorf("goroutine %d: %d after %d", w, id, ids[n-1])
							failed.Store(true)
							return
						}
						ids = append(ids, id)
					}
					all[w] = ids
				})
			}
			wg.Wait()
			if failed.Load() {
				return
			}
			merged := slices.Concat(all...)
			slices.Sort(merged)
			for i, id := range merged {
				if i > 0 && id == merged[i-1] {
					t.Fatalf("duplicate ID %d", id)
				}
				tm, machine, seq, err := l.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if machine != int64(1)<<l.MachineBits-1 || seq >= int64(1)<<l.SequenceBits {
					t.Fatalf("id %d decodes to machine %d sequence %d", id, machine, seq)
				}
				if _, ok := fence.approved.Load(tm.UnixMilli()); !ok {
					t.Fatalf("id %d (%v %d %d): its tick was never approved by the fence", id, tm, machine, seq)
				}
			}
			if len(merged) == 0 {
				t.Fatal("no IDs")
			}
		})
	}
}
