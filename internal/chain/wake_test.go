package chain

import (
	"context"
	"github.com/idforge/idforge/engine/segment"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// The fast path has no wake-up check: the worker cuts every fetched range
// into segments of about a quarter of the target (whole steps), so a caller
// moving the head wakes it about four times per target. Check the cut.
func TestFetchCutsRangeIntoQuarterTargetSegments(t *testing.T) {
	var next atomic.Int64
	d := distFunc(func(_ context.Context, n int64) (int64, error) { return next.Add(n) + 1000, nil })
	c, err := New(d, segment.Settings{Step: 10, SafeDistance: 8}, Owned{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PrefetchPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := c.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first != 1001 {
		t.Fatalf("first ID %d, want 1001", first)
	}
	// Target 8 segments of 10 = 80 IDs: pieces of 20, the first fetch 160 IDs.
	const piece = 20
	var segs []*seg
	for s := c.head.Load(); s != nil; s = s.next.Load() {
		segs = append(segs, s)
	}
	if len(segs) < 8 {
		t.Fatalf("%d segments held, want the first fetch of 160 IDs cut into 8", len(segs))
	}
	for i, s := range segs {
		if s.size != piece {
			t.Errorf("segment %d: size %d, want %d", i, s.size, piece)
		}
		if i > 0 {
			p := segs[i-1]
			if s.lo != p.lo+p.size || s.base != p.base+p.size {
				t.Errorf("segment %d: lo %d base %d, not contiguous with lo %d base %d size %d", i, s.lo, s.base, p.lo, p.base, p.size)
			}
			if s.fetched != p.fetched && s.lo < 1160 {
				t.Errorf("segment %d: fetched %d, want the fetch's time %d for every piece", i, s.fetched, p.fetched)
			}
		}
	}
	if end := segs[len(segs)-1]; c.end.Load() != end.base+end.size {
		t.Errorf("end %d, want the last segment's %d", c.end.Load(), end.base+end.size)
	}
	// Every ID of the range comes out once, in order, across the cuts.
	want := first
	for range 3 * piece {
		id, err := c.NextID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want++; id != want {
			t.Fatalf("ID %d, want %d", id, want)
		}
	}
}

// distFunc adapts a function to Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
