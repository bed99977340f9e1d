package chain_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/segtest"
)

// doubleBuffer is the benchmarks' baseline: Meituan Leaf's segment double
// buffer. One mutex guards two
// buffers; once 10 % of the current segment is used a goroutine preloads the
// next; a caller that finds the current segment used up switches to the
// next or waits for the preload. Like Leaf it waits without a deadline.
type doubleBuffer struct {
	d    segment.Distributor
	step int64

	mu      sync.Mutex
	loaded  sync.Cond // broadcast when a preload finishes
	cur     leafSegment
	next    leafSegment
	hasNext bool
	loading bool
	err     error // the last preload's failure
	wg      sync.WaitGroup
}

type leafSegment struct{ last, max int64 } // last ID handed out, last ID of the segment

func newDoubleBuffer(d segment.Distributor, step int64) *doubleBuffer {
	b := &doubleBuffer{d: d, step: step}
	b.loaded.L = &b.mu
	return b
}

func (b *doubleBuffer) NextID(context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.cur.last < b.cur.max {
			b.cur.last++
			id := b.cur.last
			if !b.hasNext && !b.loading && b.cur.max-id < b.step*9/10 {
				b.preload()
			}
			return id, nil
		}
		if b.hasNext {
			b.cur, b.hasNext = b.next, false
			continue
		}
		if !b.loading {
			if err := b.err; err != nil {
				b.err = nil // the next caller tries again
				return 0, err
			}
			b.preload()
		}
		b.loaded.Wait()
	}
}

// preload starts loading the next segment; b.mu is held.
func (b *doubleBuffer) preload() {
	b.loading = true
	b.wg.Go(func() {
		max, err := b.d.NextMaxID(context.Background(), b.step)
		b.mu.Lock()
		b.loading = false
		if err != nil {
			b.err = err
		} else {
			b.next, b.hasNext = leafSegment{last: max - b.step, max: max}, true
		}
		b.mu.Unlock()
		b.loaded.Broadcast()
	})
}

// Close waits for a preload in flight.
func (b *doubleBuffer) Close() error {
	b.wg.Wait()
	return nil
}

// The baseline must be right for the comparison to mean anything.
func TestDoubleBufferBaseline(t *testing.T) {
	b := newDoubleBuffer(segtest.NewFake(0), 10)
	defer b.Close()
	all := distinct(t, draw(t, b, 4, 10_000)...)
	if len(all) != 40_000 {
		t.Fatalf("got %d IDs, want 40000", len(all))
	}
}
