package chain

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// seg is one fetched range: IDs lo+1 .. lo+size. Callers claim an ID with a
// single atomic add on taken; an add that lands past size finds the segment
// used up (taken keeps counting, harmlessly, so no ID is ever claimed twice).
//
// The fields callers only read sit on their own cache line, away from the
// contended counter, so under contention NextID pays for the add alone. The
// padding makes seg exactly two cache lines (layout_test.go checks it).
type seg struct {
	lo   int64
	size int64
	// Chain only. base is the number of IDs in the chain's earlier segments,
	// so base+taken is the chain's position while s is the head.
	base    int64
	fetched int64 // clock Unix nanoseconds when the range arrived, for the TTL
	_       [32]byte

	taken   atomic.Int64
	next    atomic.Pointer[seg]
	retired bool // discarded by TTL or Close; touched by the worker and Close only
	_       [47]byte
}

// claim takes the next ID of s, reporting false when s is used up. It reads
// the bounds before the add: on x86 no load after a locked instruction may
// start before the instruction completes, so loads placed after the add
// would wait for it.
func (s *seg) claim() (int64, bool) {
	lo, size := s.lo, s.size
	n := s.taken.Add(1)
	return lo + n, n <= size
}

// drop makes every later claim on s fail and reports how many of its IDs
// were never claimed. What was claimed before stays served.
func (s *seg) drop() int64 {
	return max(0, s.size-(s.taken.Add(s.size)-s.size))
}

// Single is the single-segment generator behind the registry's "segment"
// kind: it serves
// one segment at a time with an atomic add and, when the segment is used up,
// fetches the next one synchronously. One caller fetches while the others
// wait for it, each for as long as its ctx and [segment.Settings].MaxWait allow.
//
// IDs are strictly increasing per generator. Every step-th caller pays a
// store round trip; the chain hides that behind a prefetch worker.
type Single struct {
	cur     atomic.Pointer[seg]
	fetch   chan struct{} // one-slot semaphore: a single refill at a time
	d       segment.Distributor
	cfg     config
	fence   *fence // nil unless Settings.Fence
	prevMax int64  // guarded by fetch
}

var _ engine.Generator = (*Single)(nil)

// NewSingle returns a single-segment generator drawing from d, configured
// by s and o. Of the settings, Step, MaxWait and Fence apply, with the store
// call timeout; the others are validated and ignored. It does not talk to the store: the
// first NextID does.
func NewSingle(d segment.Distributor, s segment.Settings, o Owned) (*Single, error) {
	cfg, err := newConfig(d, s, o)
	if err != nil {
		return nil, err
	}
	g := &Single{d: d, cfg: cfg, fetch: make(chan struct{}, 1), fence: newFence(cfg.fence, cfg.clock, d)}
	g.cur.Store(&seg{})
	return g, nil
}

// NextID returns the next ID. When the segment is used up it fetches the
// next one from the store, or waits for the caller already doing so; a
// failed fetch returns an [*exhaustedError] naming the store's error.
func (g *Single) NextID(ctx context.Context) (int64, error) {
	s := g.cur.Load()
	if g.fence != nil {
		if err := g.fence.check(g.cfg.name); err != nil {
			// Fetching confirms: what the generator holds is dropped and
			// the caller is served from a new segment if the store answers.
			s.drop()
			return g.refillFenced(ctx, s, err)
		}
	}
	if id, ok := s.claim(); ok {
		return id, nil
	}
	if ctx == nil { // as database/sql would, rather than panic on the wait
		ctx = context.Background()
	}
	return g.refill(ctx, s)
}

// Discard drops the IDs left in the current segment, at once: the next
// caller fetches a fresh one. The root registry calls it when the store was
// reset ([engine.ErrStoreReset]). IDs claimed before Discard stay served.
func (g *Single) Discard(cause error) {
	g.cur.Load().drop()
	g.cfg.logger.Warn("segment: dropped the rest of the current segment", "name", g.cfg.name, "cause", cause)
}

func (g *Single) refill(ctx context.Context, used *seg) (int64, error) {
	start := time.Now()
	if g.cfg.maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, g.cfg.maxWait, maxWaitError(g.cfg.maxWait))
		defer cancel()
	}
	select {
	case g.fetch <- struct{}{}:
	case <-ctx.Done():
		return 0, &exhaustedError{Name: g.cfg.name, Waited: time.Since(start), Cause: context.Cause(ctx)}
	}
	defer func() { <-g.fetch }()
	// Whoever held the semaphore before us may have refilled already.
	if s := g.cur.Load(); s != used {
		if id, ok := s.claim(); ok {
			return id, nil
		}
	}
	fctx, cancel := context.WithTimeout(ctx, g.cfg.fetchTimeout)
	sent := g.cfg.clock.Now()
	max, err := g.d.NextMaxID(fctx, g.cfg.step)
	cancel()
	if err == nil && g.fence != nil {
		g.fence.confirm(sent)
	}
	if err == nil {
		err = checkRange(g.prevMax, max, g.cfg.step)
	}
	if err != nil {
		return 0, &exhaustedError{Name: g.cfg.name, Waited: time.Since(start),
			Store: fmt.Errorf("fetch of %d IDs: %w", g.cfg.step, err)}
	}
	g.prevMax = max
	s := &seg{lo: max - g.cfg.step, size: g.cfg.step}
	s.taken.Store(1) // the first ID is ours
	g.cur.Store(s)
	return s.lo + 1, nil
}

// refillFenced fetches a new segment for a caller the fence stopped; if
// that fails too the caller gets the fence's error beside the store's.
func (g *Single) refillFenced(ctx context.Context, used *seg, fenced error) (int64, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	id, err := g.refill(ctx, used)
	if err != nil {
		return 0, fmt.Errorf("%w (%w)", fenced, err)
	}
	return id, nil
}

func maxWaitError(d time.Duration) error {
	return fmt.Errorf("%w: waited MaxWait %v", context.DeadlineExceeded, d)
}
