package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/outage"
)

// Chain is the lock-free segment chain. It holds a
// linked list of fetched segments; callers take IDs from the head segment
// with one atomic add and move to the next segment with a compare-and-swap
// on the head pointer, so NextID costs about as much as an atomic counter and
// allocates nothing. A prefetch goroutine keeps the list long enough:
//
//   - It keeps at least the prefetch distance fetched ahead, counted in
//     segments of step IDs and measured in IDs not yet handed out. The
//     distance starts at the safe distance.
//   - When fewer are ahead, it tops the list up to twice the distance with
//     one store call (rounded up to whole steps), appended as one segment:
//     so one store call per distance's worth of IDs at most, and between
//     one and two distances held ahead.
//   - It wakes every prefetch period, whenever a caller has used up about a
//     quarter of the distance, or one step if that is more (what it fetches
//     is cut into segments of that size, and a caller moving the head to the
//     next segment wakes it), and
//     when a caller finds nothing ready.
//   - A caller that found nothing ready is hungry: the worker doubles the
//     distance (up to the maximum) after each hunger while the store is
//     healthy, and halves it back, once per period, when nobody was hungry
//     for the hunger window. Hunger caused by a store outage does not widen
//     the distance.
//   - With [segment.Settings].Ahead, the distance never falls below what holds
//     Ahead's worth of the current issue rate, which the worker measures
//     from the head's position each time it wakes: raised at once when
//     traffic grows, halved back once per period when it falls.
//   - A failed fetch is retried with a jittered backoff from 10 ms doubling
//     up to the prefetch period (at most 1 s); meanwhile callers are served
//     from what the chain holds. An outage is logged when it starts, at
//     most every 10 s while it lasts and when it ends, with its length.
//
// When the chain runs dry NextID waits for the worker until ctx ends (or
// [segment.Settings].MaxWait passes) and returns an [*exhaustedError] naming the store's
// last error. A store that refuses the sequence outright (an error wrapping
// engine.ErrInvalidConfig, engine.ErrUnknownGenerator, engine.ErrNoFloor or
// engine.ErrIDOverflow, and not engine.ErrStoreUnavailable) is no outage to
// wait out: a dry chain then fails at once with that error, while the
// worker keeps asking, in case the store's configuration changes; the
// refusal is logged once, not summarised like an outage. IDs are strictly increasing per Chain and never repeated: a
// distributor answer that goes backwards or overlaps is refused
// ([errInvalidRange]). Close the chain to stop the worker.
//
// Four values are fixed rather than settings, since no workload seen needs
// others: the prefetch period is 1 s and the hunger window 5 s, as in
// CosId, short enough that the distance follows traffic within seconds and
// long enough that the worker costs nothing measurable; the distance widens
// to at most 1,000,000 segments (10^9 IDs at the default step, the order of
// CosId's cap; lowered to what Step allows without overflowing int64, and
// never below SafeDistance); one store call may take 10 s, so a store that
// stops answering shows up as an error instead of a fetch that never
// returns.
type Chain struct {
	_     [64]byte // keep the hot head pointer off other objects' cache lines
	head  atomic.Pointer[seg]
	wake  chan struct{} // capacity 1: pending wake-up of the worker
	fence *fence        // nil unless Settings.Fence
	_     [40]byte

	d          segment.Distributor
	cfg        config
	cancel     context.CancelFunc
	done       chan struct{} // closed when the worker returns
	closeOnce  sync.Once
	closed     atomic.Bool
	maxWaitErr error

	hungry    atomic.Int64 // NextID calls that found nothing ready
	starved   atomic.Int64 // of those, the ones that found the store healthy
	healthy   atomic.Bool  // the last fetch succeeded
	distance  atomic.Int64 // prefetch distance in segments
	end       atomic.Int64 // IDs fetched so far: the tail's base+size
	fetches   atomic.Int64
	failures  atomic.Int64
	discarded atomic.Int64

	mu      sync.Mutex
	ready   chan struct{} // closed and replaced when a segment is appended, on a refusal, and at Close
	lastErr error         // the last failed fetch, nil once the store answers again
	refused bool          // lastErr is a refusal (see refusal): a dry chain fails at once

	// Owned by the worker goroutine.
	tail        *seg
	prevMax     int64
	seenStarved int64
	lastHunger  time.Time
	lastAdjust  time.Time
	backoff     time.Duration
	retryAt     time.Time
	outage      outage.Log
	// refusalLogged: the store's refusal of the sequence was logged; it is
	// not logged again until the store serves the sequence.
	refusalLogged bool
	traffic       traffic // with Settings.Ahead
}

// traffic is the issue rate the worker measures for [segment.Settings].Ahead.
type traffic struct {
	rate      float64   // IDs per second, weighted over about rateWindow
	at        time.Time // when issued and discarded were read; zero before the first look
	issued    int64
	discarded int64
}

var (
	_ engine.Generator = (*Chain)(nil)
	_ io.Closer        = (*Chain)(nil)
	_ engine.Generator = (*Single)(nil)
)

// newChain starts a segment chain drawing from d and its prefetch worker,
// with what the runner of the chain owns. It does not wait for the first
// fetch: early callers wait for it instead.
func New(d segment.Distributor, s segment.Settings, o Owned) (*Chain, error) {
	cfg, err := newConfig(d, s, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	root := &seg{retired: true} // empty: the first caller finds it used up
	c := &Chain{
		wake:       make(chan struct{}, 1),
		d:          d,
		cfg:        cfg,
		cancel:     cancel,
		done:       make(chan struct{}),
		maxWaitErr: maxWaitError(cfg.maxWait),
		ready:      make(chan struct{}),
		tail:       root,
		fence:      newFence(cfg.fence, cfg.clock, d),
		outage: outage.Log{Logger: cfg.logger.With("name", cfg.name),
			Still: "segment: store still failing", End: "segment: store answered again"},
	}
	c.head.Store(root)
	c.distance.Store(cfg.safeDistance)
	go c.run(ctx)
	return c, nil
}

// NextID returns the next ID. When IDs are ready (the common case) it costs
// an atomic add and ignores ctx. When none are, it waits for the prefetch
// worker until ctx ends or [segment.Settings].MaxWait passes and then returns an
// [*exhaustedError]; when the store refused the sequence, it returns that
// error at once, as an *exhaustedError without a Cause. After Close it
// returns an error wrapping engine.ErrClosed.
//
// The fast path is three loads, the add and one compare; everything else
// (moving the head, which also wakes the worker, and waiting) is in slow.
// NextID cannot inline (the call to slow alone costs more than the
// inliner's budget), so it keeps a frame a bare atomic add does not have:
// go:nosplit drops the stack-bound check from it (the frame is a few words
// and slow, an ordinary function, checks its own stack).
//
//go:nosplit
func (c *Chain) NextID(ctx context.Context) (int64, error) {
	if c.fence != nil {
		if err := c.fence.check(c.cfg.name); err != nil {
			return c.fenced(ctx, err)
		}
	}
	s := c.head.Load()
	// seg.claim spelled out: inlined, it leaves an inline mark and a move
	// more, and measured 4% slower (BenchmarkNextID/paired). The bounds are
	// read before the add for the reason claim gives.
	lo, size := s.lo, s.size
	if n := s.taken.Add(1); n <= size {
		return lo + n, nil
	}
	return c.slow(ctx, s)
}

// slow moves the head past used-up segments, or waits for the worker. s is
// the head segment NextID found used up. Moving the head wakes the worker:
// the worker cuts what it fetches into segments of about a quarter of the
// prefetch distance (at least one step), so callers wake it about four
// times per distance without a check on the fast path.
func (c *Chain) slow(ctx context.Context, s *seg) (int64, error) {
	if ctx == nil { // as database/sql would, rather than panic on the wait
		ctx = context.Background()
	}
	var start time.Time
	for {
		if c.closed.Load() {
			if c.cfg.name == "" {
				return 0, fmt.Errorf("%w: segment chain", engine.ErrClosed)
			}
			return 0, fmt.Errorf("%w: segment chain %q", engine.ErrClosed, c.cfg.name)
		}
		if next := s.next.Load(); next != nil {
			if c.head.CompareAndSwap(s, next) {
				c.signal()
			}
			s = c.head.Load()
			if id, ok := s.claim(); ok {
				return id, nil
			}
			continue
		}
		// Take the channel before looking again: a segment appended after
		// the look closes this channel.
		c.mu.Lock()
		ready, refused, storeErr := c.ready, c.refused, c.lastErr
		c.mu.Unlock()
		if c.closed.Load() || s.next.Load() != nil {
			continue
		}
		if refused {
			var waited time.Duration
			if !start.IsZero() {
				waited = time.Since(start)
			}
			return 0, &exhaustedError{Name: c.cfg.name, Waited: waited, Store: storeErr}
		}
		if start.IsZero() {
			start = time.Now()
			c.hungry.Add(1)
			if c.healthy.Load() {
				c.starved.Add(1)
			}
			if c.cfg.maxWait > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, c.cfg.maxWait, c.maxWaitErr)
				defer cancel()
			}
		}
		c.signal()
		select {
		case <-ready:
		case <-ctx.Done():
			c.mu.Lock()
			storeErr := c.lastErr
			c.mu.Unlock()
			return 0, &exhaustedError{Name: c.cfg.name, Waited: time.Since(start), Store: storeErr, Cause: context.Cause(ctx)}
		}
	}
}

// fenced waits, as a caller of a dry chain does, until the store confirms
// the IDs the chain holds (a fetch, or another operation of the store) and
// then serves one; when ctx or MaxWait ends first it returns the fence's
// error, and when the store refuses the sequence, that at once.
func (c *Chain) fenced(ctx context.Context, fenceErr error) (int64, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.cfg.maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.cfg.maxWait, c.maxWaitErr)
		defer cancel()
	}
	// Confirmations that are not fetches close no channel: look again now
	// and then.
	tick := time.NewTicker(max(c.fence.window/8, time.Millisecond))
	defer tick.Stop()
	for {
		c.mu.Lock()
		ready, refused, storeErr := c.ready, c.refused, c.lastErr
		c.mu.Unlock()
		if c.closed.Load() || c.fence.check(c.cfg.name) == nil {
			return c.NextID(ctx)
		}
		if refused {
			return 0, fmt.Errorf("%w; the store refuses the sequence: %w", fenceErr, storeErr)
		}
		c.signal()
		select {
		case <-ready:
		case <-tick.C:
		case <-ctx.Done():
			return 0, fenceErr
		}
	}
}

// signal wakes the worker without blocking.
func (c *Chain) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close stops the prefetch worker (cancelling a fetch in flight and waiting
// for the distributor to return) and discards the IDs it held. NextID calls
// that start after Close return an error wrapping engine.ErrClosed. Close is
// idempotent and always returns nil.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.cancel()
		<-c.done
		c.retireUpTo(math.MaxInt64)
		c.mu.Lock()
		close(c.ready)
		c.ready = make(chan struct{})
		c.mu.Unlock()
	})
	return nil
}

// Discard drops every fetched ID not handed out yet, at once: the next
// callers wait for a fresh fetch. The registry (package idforge) calls it
// when the store was reset ([engine.ErrStoreReset]),
// because what the chain holds may now be handed out to another process too;
// the chain also calls it itself when a fetch reports a reset. IDs claimed
// before it stay served.
func (c *Chain) Discard(cause error) {
	dropped := int64(0)
	for s := c.head.Load(); s != nil; s = s.next.Load() {
		dropped += s.drop()
	}
	c.discarded.Add(dropped)
	// Callers that now wait for a fetch are told why, until one succeeds.
	c.mu.Lock()
	c.lastErr, c.refused = cause, false
	c.mu.Unlock()
	c.healthy.Store(false)
	c.signal()
	c.cfg.logger.Warn("segment: dropped the IDs the chain held", "name", c.cfg.name, "dropped", dropped, "cause", cause)
}

// Name returns the sequence name its runner gave the chain ("" without a runner).
func (c *Chain) Name() string { return c.cfg.name }

// Stats is a snapshot of a chain's prefetching, for monitoring and tests.
type Stats struct {
	// Step is the number of IDs per segment.
	Step int64
	// PrefetchDistance is the current prefetch distance in segments: the
	// safe distance, or more while callers are hungry or Ahead asks for
	// more.
	PrefetchDistance int64
	// Ahead is the number of fetched IDs not handed out yet.
	Ahead int64
	// Issued is the number of IDs handed out.
	Issued int64
	// Fetches counts successful store calls; Failures counts failed ones
	// (store errors, timeouts and refused ranges).
	Fetches, Failures int64
	// Hungry counts NextID calls that found no ID ready and had to wait.
	Hungry int64
	// Discarded counts fetched IDs never handed out: expired by the TTL,
	// dropped by Discard or by Close.
	Discarded int64
	// LastError is the last failed fetch, nil once the store answers again.
	LastError error
}

// Stats returns a snapshot of the chain's counters.
// The figures are read one by one while callers keep drawing, so they agree
// only approximately.
func (c *Chain) Stats() Stats {
	pos := c.position()
	end := c.end.Load()
	c.mu.Lock()
	lastErr := c.lastErr
	c.mu.Unlock()
	return Stats{
		Step:             c.cfg.step,
		PrefetchDistance: c.distance.Load(),
		Ahead:            max(end-pos, 0),
		Issued:           max(pos-c.discarded.Load(), 0),
		Fetches:          c.fetches.Load(),
		Failures:         c.failures.Load(),
		Hungry:           c.hungry.Load(),
		Discarded:        c.discarded.Load(),
		LastError:        lastErr,
	}
}

// position is the number of IDs handed out or discarded so far.
func (c *Chain) position() int64 {
	h := c.head.Load()
	return h.base + min(h.taken.Load(), h.size)
}

func (c *Chain) run(ctx context.Context) {
	defer close(c.done)
	timer := time.NewTimer(c.cfg.period)
	defer timer.Stop()
	for {
		wait := c.cycle(ctx)
		if ctx.Err() != nil {
			return
		}
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

// cycle is one round of the worker: drop expired segments, adjust the
// distance, top the chain up. It returns how long to sleep unless woken.
func (c *Chain) cycle(ctx context.Context) time.Duration {
	now := c.cfg.clock.Now()
	if c.cfg.ttl > 0 {
		c.retireUpTo(now.Add(-c.cfg.ttl).UnixNano())
	}
	c.adjust(now)
	if wait := time.Until(c.retryAt); wait > 0 {
		return min(wait, c.cfg.period)
	}
	step := c.cfg.step
	target := c.distance.Load() * step
	ahead := c.end.Load() - c.position()
	if ahead >= target && (c.fence == nil || !c.fence.stale()) {
		return min(c.cfg.period, c.fenceWait())
	}
	// Topping up to twice the target makes each store call bring at least a
	// target's worth: fewer round trips, and fewer wake-ups of this worker
	// that could stall a caller's thread. A chain that holds that much
	// already is here to confirm a stale fence: a step of its own (asking
	// for nothing would be refused as a bad step and fail the callers the
	// fence holds back).
	size := max((2*target-ahead+step-1)/step*step, step)
	if err := c.fetch(ctx, size, target); err != nil {
		if ctx.Err() != nil {
			return 0 // closing
		}
		c.fail(err)
		return min(time.Until(c.retryAt), c.cfg.period)
	}
	return 0 // look again at once: callers may have used up what came in
}

// fenceWait is how long the worker may sleep before an idle chain's fence
// wants a confirming fetch.
func (c *Chain) fenceWait() time.Duration {
	if c.fence == nil {
		return c.cfg.period
	}
	return max(c.fence.window/4, time.Millisecond)
}

func (c *Chain) fetch(ctx context.Context, size, target int64) error {
	fctx, cancel := context.WithTimeout(ctx, c.cfg.fetchTimeout)
	sent := c.cfg.clock.Now()
	max, err := c.d.NextMaxID(fctx, size)
	cancel()
	if err != nil {
		return fmt.Errorf("fetch of %d IDs: %w", size, err)
	}
	if err := checkRange(c.prevMax, max, size); err != nil {
		return err
	}
	if c.fence != nil {
		c.fence.confirm(sent)
	}
	c.prevMax = max
	if !c.healthy.Load() {
		c.recovered() // before waking anyone, so they see a healthy chain
	}
	// Cut the range into segments of about a quarter of the target (whole
	// steps, at least one): every move of the head to the next segment wakes
	// this worker, so callers wake it about four times per target, or once
	// per step while the target is under four steps. Linked
	// first and published with one store, so callers see all or nothing.
	step := c.cfg.step
	piece := (target/4 + step - 1) / step * step
	if piece < step {
		piece = step
	}
	fetched := c.cfg.clock.Now().UnixNano()
	base := c.tail.base + c.tail.size
	first := &seg{lo: max - size, size: min(piece, size), base: base, fetched: fetched}
	last := first
	for done := last.size; done < size; done += last.size {
		s := &seg{lo: max - size + done, size: min(piece, size-done), base: base + done, fetched: fetched}
		last.next.Store(s)
		last = s
	}
	c.tail.next.Store(first)
	c.tail = last
	c.end.Store(last.base + last.size)
	c.fetches.Add(1)
	c.mu.Lock()
	close(c.ready)
	c.ready = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// refusal reports whether err is the store refusing the sequence outright
// rather than failing: a configuration it rejects, a sequence it does not
// serve or has no floor for, one at the end of its range. Waiting for the
// next retry would not help the caller.
func refusal(err error) bool {
	if errors.Is(err, engine.ErrStoreUnavailable) {
		return false
	}
	for _, target := range []error{engine.ErrInvalidConfig, engine.ErrUnknownGenerator, engine.ErrNoFloor, engine.ErrIDOverflow} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (c *Chain) fail(err error) {
	c.failures.Add(1)
	if errors.Is(err, engine.ErrStoreReset) {
		c.Discard(err)
	}
	refused := refusal(err)
	c.mu.Lock()
	c.lastErr = err
	c.refused = refused
	if refused { // wake the callers waiting: they fail now, not at MaxWait
		close(c.ready)
		c.ready = make(chan struct{})
	}
	c.mu.Unlock()
	maxBackoff := min(c.cfg.period, time.Second)
	now := c.cfg.clock.Now()
	switch {
	case errors.Is(err, errInvalidRange):
		c.cfg.logger.Error("segment: distributor returned a range that could repeat IDs; dropped it", "name", c.cfg.name, "err", err)
	case refused:
		// A refusal lasts until someone changes the store or the Floors:
		// one line, not a summary every 10 s repeating it.
		if !c.refusalLogged {
			c.refusalLogged = true
			c.outage.Logger.Error("segment: the store refuses the sequence; NextID fails at once on a dry chain while it does",
				"err", err, "ahead", c.end.Load()-c.position())
		}
	default:
		c.outage.Failed(now, slog.LevelWarn, "segment: store failed; serving prefetched IDs and retrying",
			err, "ahead", c.end.Load()-c.position())
	}
	if c.backoff == 0 {
		c.backoff = min(10*time.Millisecond, maxBackoff)
	} else {
		c.backoff = min(2*c.backoff, maxBackoff)
	}
	c.healthy.Store(false)
	wait := c.backoff
	if half := wait / 2; half > 0 {
		wait = wait - half/2 + rand.N(half) // ±25 % so instances do not retry in step
	}
	c.retryAt = time.Now().Add(wait)
}

func (c *Chain) recovered() {
	c.outage.Recovered(c.cfg.clock.Now())
	if c.refusalLogged {
		c.refusalLogged = false
		c.outage.Logger.Info("segment: the store serves the sequence again")
	}
	c.healthy.Store(true)
	c.backoff = 0
	c.retryAt = time.Time{}
	c.mu.Lock()
	c.lastErr = nil
	c.refused = false
	c.mu.Unlock()
}

// adjust doubles the prefetch distance after callers starved (went hungry
// while the store was healthy, so the distance was too short) and halves it
// back once per period when nobody starved for the hunger window. Hunger
// during an outage or before the first fetch says nothing about the distance.
// The distance never falls below floor: the safe distance, or what holds
// Ahead's worth of the current traffic.
func (c *Chain) adjust(now time.Time) {
	floor := c.floor(now)
	d := c.distance.Load()
	if h := c.starved.Load(); h != c.seenStarved {
		c.seenStarved = h
		c.lastHunger = now
		if d < c.cfg.maxDistance {
			d = min(2*max(d, floor), c.cfg.maxDistance)
			c.distance.Store(d)
			c.lastAdjust = now
			c.cfg.logger.Debug("segment: callers hungry; prefetch distance widened", "name", c.cfg.name, "distance", d)
		}
		return
	}
	if d < floor {
		c.distance.Store(floor)
		return
	}
	if d > floor && now.Sub(c.lastHunger) >= c.cfg.hungerWindow && now.Sub(c.lastAdjust) >= c.cfg.period {
		c.distance.Store(max(d/2, floor))
		c.lastAdjust = now
	}
}

// floor returns the least prefetch distance, in segments: the safe
// distance, or with Settings.Ahead enough segments to hold Ahead's worth of
// the issue rate, capped by the maximum distance. It measures the rate as it
// goes: IDs handed out since its last look (the head's position less what
// was discarded, which callers already move, so NextID pays nothing for it)
// over the time passed on the chain's clock, averaged exponentially with a
// time constant of rateWindow.
func (c *Chain) floor(now time.Time) int64 {
	if c.cfg.ahead <= 0 {
		return c.cfg.safeDistance
	}
	t := &c.traffic
	discarded := c.discarded.Load()
	issued := c.position() - discarded
	switch {
	case t.at.IsZero() || discarded != t.discarded || now.Before(t.at):
		// First look, IDs dropped (the position jumped by more than callers
		// took, and the two counters are not read at once), or the clock
		// stepped back: measure from here.
		t.at, t.issued, t.discarded = now, issued, discarded
	case now.After(t.at):
		dt := now.Sub(t.at)
		got := float64(max(issued-t.issued, 0)) / dt.Seconds()
		t.rate += (1 - math.Exp(-float64(dt)/float64(rateWindow))) * (got - t.rate)
		t.at, t.issued = now, issued
	}
	need := t.rate * c.cfg.ahead.Seconds() / float64(c.cfg.step)
	if need >= float64(c.cfg.maxDistance) {
		return c.cfg.maxDistance
	}
	return max(int64(math.Ceil(need)), c.cfg.safeDistance)
}

// retireUpTo discards the segments from the head on that were fetched at or
// before cutoff (Unix nanoseconds) and moves the head past them, so no
// caller serves them. Segments arrive in time order, so they form a prefix.
// Only the worker and Close (after the worker stopped) call it.
func (c *Chain) retireUpTo(cutoff int64) {
	for s := c.head.Load(); s.fetched <= cutoff; {
		if !s.retired {
			s.retired = true
			c.discarded.Add(s.drop())
		}
		next := s.next.Load()
		if next == nil {
			return
		}
		c.head.CompareAndSwap(s, next)
		s = next
	}
}
