package snowflake

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/internal/timebase"
)

// Settings configures a [Generator]. The zero value of every field means its
// documented default.
type Settings struct {
	// Layout is the bit layout (default [Default]: the zero Layout).
	Layout Layout
	// Clock is the time source (default clock.System). The generator runs
	// on clock.Steady of it: the wall time of a clock with a monotonic
	// reading is read at start and followed forward only (see the package
	// doc). A clock with a `UnixNano() int64` method is read through it.
	Clock clock.Clock
	// MaxBackwards is how long a clock step back is waited out before
	// NextID fails with engine.ErrClockBackwards (default
	// 10 ms: longer stalls are worse than failing fast; at most a minute,
	// since every caller waits it out). A negative value fails at once.
	MaxBackwards time.Duration
}

// maxMaxBackwards bounds Settings.MaxBackwards: a NextID that may block for
// longer than a minute on a clock step is a hang, not a wait.
const maxMaxBackwards = time.Minute

// unixNanoer is the fast path of clocks that can tell the time without
// building a time.Time (timebase.Cached).
type unixNanoer interface{ UnixNano() int64 }

type clockNanos struct{ c clock.Clock }

func (c clockNanos) UnixNano() int64 { return c.c.Now().UnixNano() }

// spinMax is the longest wait for the next tick that is spun through rather
// than slept: timers overshoot sub-millisecond sleeps by more than the wait.
const spinMax = time.Millisecond

// Generator issues snowflake IDs for one machine ID. It is safe for any
// number of goroutines, lock-free and allocation-free: its whole state is one
// atomic word holding the last tick and sequence number. Within a tick an ID
// costs one atomic add; a new tick is entered with a compare-and-swap. Only
// goroutines that must wait for the next tick queue, so that one of them
// spins while the others sleep. (Measured on 2 cores with a wide layout: a
// compare-and-swap loop beat a mutex by about 25% on one goroutine and 1.7x
// on two; the atomic add beats the compare-and-swap loop by 1.5x on two.)
//
// Per ID: a new tick continues the sequence, and once it has reached the
// layout's reset threshold wraps it modulo threshold+1 (to 0 when it stands
// exactly at the threshold), so the low bits cycle without a break at any
// rate; within a tick the sequence counts up, and past MaxSequence NextID waits for the next tick. A
// clock behind the last tick is waited out up to MaxBackwards, beyond that
// NextID fails with engine.ErrClockBackwards; a clock past the layout's
// Expiry fails with engine.ErrTimestampOverflow. IDs from one Generator are
// strictly increasing and never repeat.
type Generator struct {
	// Read-only after New.
	layout      Layout
	machine     int64
	machinePart int64 // machine << SequenceBits
	tickShift   uint  // of the tick in an ID
	seqMask     int64
	threshold   int64
	maxTick     int64
	seconds     bool
	epochNanos  int64
	epochMilli  int64
	unitNanos   int64
	unitMilli   int64
	now         unixNanoer
	clock       clock.Clock
	sync        timebase.Synchronizer
	fence       func(unixMilli int64) error
	// tickSem lets one goroutine at a time wait for the next tick while the
	// others sleep: spinning threads would only take CPU from the one that
	// will issue the next IDs. A channel, not a mutex, so queued callers
	// still honour their ctx.
	tickSem chan struct{}

	// The state word is tick << stateShift | seq, where the seq field is
	// wider than SequenceBits (every bit the tick leaves of 64): callers that
	// race past MaxSequence with their atomic add push it above MaxSequence,
	// which reads as "tick used up", instead of carrying into the tick.
	stateShift uint
	fieldMask  uint64
	// fastAdd is false for layouts whose seq field leaves fewer than 2^20
	// spare values; they take the compare-and-swap path for every ID.
	fastAdd bool

	_ [64]byte // keep the contended state off the read-only fields' cache line
	// state is the last tick and sequence issued. Before the first ID it
	// holds none (tick 0, used up), or the start's LastTimestamp tick used up,
	// so the next ID takes a later tick and starts its sequence at 0.
	state atomic.Uint64
	_     [56]byte

	// backwardsWaits counts the calls that waited out a clock behind the
	// last tick; off the hot cache lines, it is touched only then.
	backwardsWaits atomic.Int64
}

// none is the state before the first ID when no last timestamp is known.
func (g *Generator) none() uint64 { return g.fieldMask }

func (g *Generator) unpack(s uint64) (tick, seq int64) {
	return int64(s >> g.stateShift), int64(s & g.fieldMask)
}

func (g *Generator) pack(tick, seq int64) uint64 { return uint64(tick)<<g.stateShift | uint64(seq) }

var _ engine.Generator = (*Generator)(nil)

// New returns a generator for machineID configured by s (at most one value;
// none means Settings{}). A bad layout, a machine ID out of range or a bad
// setting wraps engine.ErrInvalidConfig.
func New(machineID int64, s ...Settings) (*Generator, error) {
	var cfg Settings
	switch len(s) {
	case 0:
	case 1:
		cfg = s[0]
	default:
		return nil, fmt.Errorf("%w: snowflake.New takes at most one Settings, got %d", engine.ErrInvalidConfig, len(s))
	}
	return newGenerator(machineID, cfg, 0, nil)
}

// Resume returns a generator for machineID, configured by s, that takes
// over the machine ID from earlier holders, as the registry's lease does
// (package idforge) and as a composition of your own may:
//
//   - last is the Unix millisecond time of the last ID (or heartbeat) an
//     earlier holder may have issued under the machine ID, 0 if unknown.
//     Its tick counts as used up: the first ID comes from a later tick. If
//     the clock is behind it by no more than s.MaxBackwards the first
//     NextID waits; further behind, Resume fails with an error wrapping
//     engine.ErrClockBackwards.
//   - fence, when not nil, guards the machine ID: NextID calls it with the
//     last Unix millisecond of the tick it is about to use, before every
//     new tick, and returns its error instead of an ID (a lease refusing
//     once it may have lost the machine ID). It must be cheap and safe for
//     concurrent use, and read time on the generator's clock.
//
// A bad setting, machine ID or a negative last wraps engine.ErrInvalidConfig.
func Resume(machineID int64, s Settings, last int64, fence func(unixMilli int64) error) (*Generator, error) {
	return newGenerator(machineID, s, last, fence)
}

// newGenerator is [New] or [Resume]: last is the timestamp to wait out,
// fence the guard of the machine ID.
func newGenerator(machineID int64, cfg Settings, last int64, fence func(unixMilli int64) error) (*Generator, error) {
	if cfg.Layout == (Layout{}) {
		cfg.Layout = Default
	}
	cfg.Clock = clock.Steady(cfg.Clock)
	switch {
	case cfg.MaxBackwards == 0:
		cfg.MaxBackwards = timebase.DefaultMaxBackwards
	case cfg.MaxBackwards < 0:
		cfg.MaxBackwards = 0
	case cfg.MaxBackwards > maxMaxBackwards:
		return nil, fmt.Errorf("%w: snowflake.Settings.MaxBackwards %v is above the bound %v", engine.ErrInvalidConfig, cfg.MaxBackwards, maxMaxBackwards)
	}
	l := cfg.Layout
	if err := l.Validate(); err != nil {
		return nil, err
	}
	switch {
	case machineID < 0 || machineID > l.maxMachineID():
		return nil, fmt.Errorf("%w: snowflake machine ID %d is outside [0, %d] of layout %s",
			engine.ErrInvalidConfig, machineID, l.maxMachineID(), l.String())
	case last < 0:
		return nil, fmt.Errorf("%w: snowflake last timestamp %d is negative", engine.ErrInvalidConfig, last)
	}
	g := &Generator{
		layout:      l,
		machine:     machineID,
		machinePart: machineID << l.SequenceBits,
		tickShift:   uint(l.MachineBits + l.SequenceBits),
		seqMask:     l.maxSequence(),
		threshold:   l.resetThreshold(),
		maxTick:     l.maxTick(),
		seconds:     l.seconds(),
		epochNanos:  l.Epoch.UnixNano(),
		epochMilli:  l.Epoch.UnixMilli(),
		unitNanos:   int64(l.unit()),
		unitMilli:   int64(l.unit() / time.Millisecond),
		clock:       cfg.Clock,
		sync:        timebase.Synchronizer{Clock: cfg.Clock, MaxWait: cfg.MaxBackwards},
		fence:       fence,
		tickSem:     make(chan struct{}, 1),
		stateShift:  uint(64 - l.TimestampBits),
		fieldMask:   uint64(1)<<(64-l.TimestampBits) - 1,
	}
	g.fastAdd = g.fieldMask-uint64(g.seqMask) >= 1<<20
	if c, ok := cfg.Clock.(unixNanoer); ok {
		g.now = c
	} else {
		g.now = clockNanos{cfg.Clock}
	}
	g.state.Store(g.none())

	nowNanos := g.now.UnixNano()
	if g.tickOf(nowNanos) > g.maxTick {
		return nil, l.overflow(time.Unix(0, nowNanos))
	}
	if last > 0 && last >= g.epochMilli {
		tick := (last - g.epochMilli) / g.unitMilli
		if tick > g.maxTick {
			return nil, l.overflow(time.UnixMilli(last))
		}
		ahead := time.Duration(math.MaxInt64) // for a saved time past 2262
		if last <= math.MaxInt64/int64(time.Millisecond) {
			ahead = time.Duration(last*int64(time.Millisecond) - nowNanos)
		}
		if ahead > cfg.MaxBackwards {
			return nil, fmt.Errorf("idforge: snowflake machine %d: last saved timestamp %s: %w", machineID,
				time.UnixMilli(last).UTC().Format(time.RFC3339Nano), &timebase.BackwardsError{Behind: ahead, MaxWait: cfg.MaxBackwards})
		}
		g.state.Store(g.pack(tick, g.seqMask))
	}
	return g, nil
}

// LastTimestamp returns the Unix millisecond time of the tick of the newest
// ID issued (or of the tick of [Resume]'s last before the first), 0 if none:
// what a machine-ID lease stores so the next holder can wait it out.
func (g *Generator) LastTimestamp() int64 {
	s := g.state.Load()
	if s == g.none() {
		return 0
	}
	tick, _ := g.unpack(s)
	return g.epochMilli + tick*g.unitMilli
}

// waits returns how many NextID calls found the clock behind the last tick
// issued and waited until it caught up, within MaxBackwards: a clock
// stepped back. The calls refused instead return an error wrapping
// engine.ErrClockBackwards. The package's tests read it.
func (g *Generator) waits() int64 { return g.backwardsWaits.Load() }

// tickOf converts a Unix nanosecond time to a tick; any time before the epoch
// gives -1 (division would round the last tick before it up to 0).
func (g *Generator) tickOf(nanos int64) int64 {
	d := nanos - g.epochNanos
	switch {
	case d < 0:
		return -1
	case g.seconds:
		return d / 1e9
	default:
		return d / 1e6
	}
}

// NextID returns the next ID. It waits (honouring ctx) only for a sequence
// overflow, spinning through the rest of a millisecond tick and sleeping on
// the clock for a second tick, and for a clock step back within MaxBackwards.
func (g *Generator) NextID(ctx context.Context) (int64, error) {
	// Load the state before reading the clock: the state's tick then comes
	// from an earlier reading and cannot look like the clock went back.
	last := g.state.Load()
	now := g.tickOf(g.now.UnixNano())
	if tick, seq := g.unpack(last); g.fastAdd && tick == now && seq < g.seqMask {
		// The common case: the tick is current and has room. The add
		// cannot fail; the number it took is ours if it is still in range.
		if err := g.checkFence(now); err != nil {
			return 0, err
		}
		if tick, seq := g.unpack(g.state.Add(1)); tick == now && seq <= g.seqMask {
			return now<<g.tickShift | g.machinePart | seq, nil
		}
		// Others took the rest of the tick, or moved on to a later one:
		// the number we took is skipped.
		last = g.state.Load()
	}
	for {
		tick, seq := g.unpack(last)
		switch {
		case now > tick:
			tick = now
			switch {
			case seq < g.threshold:
				seq++
			case g.threshold < 0: // resetEveryTick
				seq = 0
			default:
				// Wrap modulo threshold+1 rather than restart at 0: a tick
				// that passed the threshold part-way would otherwise cut the
				// cycle short and favour the low residues of large shard counts.
				// Numbers that racing adds took past MaxSequence were never issued.
				seq = (min(seq, g.seqMask) + 1) % (g.threshold + 1)
			}
		case now == tick && seq < g.seqMask:
			seq++
		default: // sequence used up, or the clock is behind the last tick
			var err error
			if now, err = g.wait(ctx, now, tick); err != nil {
				return 0, err
			}
			last = g.state.Load()
			continue
		}
		if tick > g.maxTick {
			return 0, g.layout.overflow(time.Unix(0, g.epochNanos+tick*g.unitNanos))
		}
		if err := g.checkFence(tick); err != nil {
			return 0, err
		}
		if g.state.CompareAndSwap(last, g.pack(tick, seq)) {
			return tick<<g.tickShift | g.machinePart | seq, nil
		}
		// Another goroutine won: retry on its state, reading the clock again
		// only if the winner's tick is later than our reading.
		last = g.state.Load()
		if tick, _ := g.unpack(last); tick > now {
			now = g.tickOf(g.now.UnixNano())
		}
	}
}

// checkFence asks the fence about the last millisecond of tick: an ID of a
// second tick may be handed out at any moment of that second, and a
// successor on the machine ID may start issuing right after the fence's
// bound.
func (g *Generator) checkFence(tick int64) error {
	if g.fence == nil {
		return nil
	}
	return g.fence(g.epochMilli + (tick+1)*g.unitMilli - 1)
}

// wait returns once the clock has moved past lastTick (now == lastTick, the
// sequence is used up) or reached it (now < lastTick, the clock went back),
// and returns the tick it then reads.
func (g *Generator) wait(ctx context.Context, now, lastTick int64) (int64, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if now < 0 {
		return 0, fmt.Errorf("%w: snowflake clock reads %s, before the epoch of layout %s", engine.ErrInvalidConfig,
			g.clock.Now().UTC().Format(time.RFC3339Nano), g.layout.String())
	}
	if now < lastTick {
		if err := g.waitBackwards(ctx, lastTick); err != nil {
			return 0, err
		}
		g.backwardsWaits.Add(1)
		return g.tickOf(g.now.UnixNano()), nil
	}
	select {
	case g.tickSem <- struct{}{}:
		defer func() { <-g.tickSem }()
	case <-ctx.Done():
		return 0, fmt.Errorf("idforge: snowflake waiting for the next tick: %w", ctx.Err())
	}
	if tick, _ := g.unpack(g.state.Load()); tick > lastTick { // waited out while we queued
		return g.tickOf(g.now.UnixNano()), nil
	}
	next := g.epochNanos + (lastTick+1)*g.unitNanos
	var spinStart time.Time
	for i := 0; ; i++ {
		nanos := g.now.UnixNano()
		if nanos >= next {
			return g.tickOf(nanos), nil
		}
		// The clock may step back while we wait: refuse a long step as
		// anywhere else, rather than sleep it out.
		if behind := time.Duration(next - g.unitNanos - nanos); behind > g.sync.MaxWait {
			return 0, &timebase.BackwardsError{Behind: behind, MaxWait: g.sync.MaxWait}
		}
		// Sleep on the generator's clock when the wait is long, or when the
		// clock did not move while we spun (a fake or a cached clock).
		long := time.Duration(next-nanos) > spinMax
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, fmt.Errorf("idforge: snowflake waiting for the next tick: %w", err)
			}
			if i == 0 {
				spinStart = time.Now()
			} else if time.Since(spinStart) > spinMax {
				long = true
			}
		}
		if long {
			if err := g.clock.Sleep(ctx, time.Duration(next-nanos)); err != nil {
				return 0, fmt.Errorf("idforge: snowflake waiting for the next tick: %w", err)
			}
			spinStart = time.Now()
			continue
		}
		runtime.Gosched()
	}
}

// waitBackwards waits until the clock reaches lastTick again, up to the
// MaxBackwards bound.
func (g *Generator) waitBackwards(ctx context.Context, lastTick int64) error {
	target := time.Unix(0, g.epochNanos+lastTick*g.unitNanos)
	if g.sync.MaxWait == 0 { // the Synchronizer reads 0 as its default
		if behind := target.Sub(g.clock.Now()); behind > 0 {
			return &timebase.BackwardsError{Behind: behind}
		}
		return nil
	}
	return g.sync.WaitUntil(ctx, target)
}
