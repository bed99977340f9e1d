package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// monotonic is a Clock that also reads a monotonic clock: one that moves
// only forward, as time passes, whatever is done to the wall clock. System
// and the clocktest fake are.
type monotonic interface {
	Clock
	// Elapsed returns the monotonic time since an origin of the clock's own.
	Elapsed() time.Duration
}

// Steady returns the time base of a running generator on c: it starts at
// c's wall time and then follows c's monotonic reading (its Elapsed method, see [Clock]),
// re-synced forward to the wall time whenever that reads later, never
// backward. A wall clock stepped back, by any amount, is not seen: the time
// base runs on until the wall clock catches up. One stepped forward is
// followed at once, as before.
//
// Steady returns c itself when c has no monotonic reading, and when Steady made
// it: a generator and the lease that fences it share one time base by
// passing one Steady clock to both. The clock returned sleeps on c and has
// two more methods: `UnixNano() int64`, the generators' fast path, and
// `Wall() time.Time`, c's own reading, for comparisons with other hosts'
// clocks.
func Steady(c Clock) Clock {
	if c == nil {
		c = System
	}
	if _, ok := c.(*steady); ok {
		return c
	}
	m, ok := c.(monotonic)
	if !ok {
		return c
	}
	s := &steady{mono: m, system: c == System}
	if n, ok := c.(interface{ UnixNano() int64 }); ok {
		s.wall = n.UnixNano
	} else {
		s.wall = func() int64 { return c.Now().UnixNano() }
	}
	wall, mono := s.read()
	s.offset.Store(wall - mono)
	return s
}

type steady struct {
	mono   monotonic
	wall   func() int64
	system bool // read both from one time.Now
	// offset is the time base minus the monotonic reading, in
	// nanoseconds: the largest wall-minus-monotonic difference seen.
	offset atomic.Int64
}

// read returns the wall time and the monotonic reading, the wall first: a
// clock moving between the two reads then makes the wall look behind, which
// is ignored, never ahead.
func (s *steady) read() (wall, mono int64) {
	if s.system {
		t := time.Now()
		return t.UnixNano(), int64(t.Sub(processStart))
	}
	wall = s.wall()
	return wall, int64(s.mono.Elapsed())
}

// UnixNano returns the time base in Unix nanoseconds.
func (s *steady) UnixNano() int64 {
	wall, mono := s.read()
	for {
		off := s.offset.Load()
		if wall-mono <= off {
			return mono + off
		}
		if s.offset.CompareAndSwap(off, wall-mono) {
			return wall
		}
	}
}

func (s *steady) Now() time.Time { return time.Unix(0, s.UnixNano()) }

func (s *steady) Wall() time.Time { return s.mono.Now() }

func (s *steady) Sleep(ctx context.Context, d time.Duration) error { return s.mono.Sleep(ctx, d) }
