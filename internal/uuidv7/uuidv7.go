// Package uuidv7 makes RFC 9562 version 7 UUIDs: time-ordered 128-bit keys
// for tables whose primary key is a uuid. The registry kind "uuidv7" is a
// [Generator]; the GORM plugin fills `idgen:"uuidv7"` fields of type
// uuid.UUID (github.com/google/uuid) or string from it; [Time] reads the
// time back out of one, for the server and the CLI that decode them.
//
// Layout (RFC 9562 §5.7, with the sub-millisecond precision of §6.2's
// method 3):
//
//	48 bits  unix_ts_ms  milliseconds since 1970-01-01 UTC
//	 4 bits  ver         7
//	12 bits  rand_a      the fraction of the millisecond, in 1/4096
//	 2 bits  var         binary 10
//	62 bits  rand_b      random, from crypto/rand
//
// The 60 bits of time and fraction are one counter per generator: each
// UUID takes the clock's value, or one more than the previous UUID's when
// that is not higher (several UUIDs in one 1/4096 ms, a clock that stepped
// back). So the UUIDs of a generator are strictly increasing, as bytes and
// as canonical strings, however fast they are drawn and whatever the clock
// does; a burst of more than 4,096 per millisecond, or a clock stepped
// back, runs the timestamp ahead of the clock until the clock catches up,
// as the RFC allows. Two generators (two processes) order their UUIDs by
// time only, to the precision of their clocks, and tell them apart by the
// 62 random bits.
//
// It imports engine and engine/clock.
package uuidv7

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// Generator hands out version 7 UUIDs. Make one with [New]; it is safe for
// concurrent use and costs no lock.
type Generator struct {
	clock clock.Clock
	last  atomic.Uint64 // the newest unix_ts_ms<<12 | rand_a handed out
}

var (
	_ engine.UUIDGenerator = (*Generator)(nil)
	_ engine.Generator     = (*Generator)(nil)
)

// New returns a generator reading the time from c (nil: clock.System).
func New(c clock.Clock) *Generator {
	if c == nil {
		c = clock.System
	}
	return &Generator{clock: c}
}

// maxStamp is the largest unix_ts_ms<<12 | rand_a: 48 bits of milliseconds
// last until the year 10889.
const maxStamp = 1<<60 - 1

// NextUUID returns a new version 7 UUID, above every one the generator
// returned before. A clock before 1970 or past the year 10889 is an error
// wrapping engine.ErrTimestampOverflow; ctx is not used, as nothing waits.
func (g *Generator) NextUUID(context.Context) ([16]byte, error) {
	now := g.clock.Now()
	ms := now.UnixMilli() // not UnixNano, which wraps in 2262
	if ms < 0 {
		return [16]byte{}, fmt.Errorf("%w: uuidv7: the clock reads %s, before 1970", engine.ErrTimestampOverflow,
			now.UTC().Format(time.RFC3339Nano))
	}
	want := uint64(ms)<<12 | uint64(now.Nanosecond()%1e6)*4096/1e6
	var stamp uint64
	for {
		last := g.last.Load()
		stamp = max(want, last+1)
		if stamp > maxStamp {
			return [16]byte{}, fmt.Errorf("%w: uuidv7: 48 bits of milliseconds are used up", engine.ErrTimestampOverflow)
		}
		if g.last.CompareAndSwap(last, stamp) {
			break
		}
	}
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], stamp>>12<<16|7<<12|stamp&0xfff)
	rand.Read(u[8:]) // never fails (crypto/rand, Go 1.24 on)
	u[8] = u[8]&0x3f | 0x80
	return u, nil
}

// NextID refuses with an error wrapping engine.ErrInvalidConfig: a UUID
// does not fit an int64. It is there so that a registry, which holds
// engine.Generator values, can hold the generator; draw with
// [Generator.NextUUID] (see engine.UUIDGeneratorOf).
func (g *Generator) NextID(context.Context) (int64, error) {
	return 0, fmt.Errorf("%w: kind \"uuidv7\" makes 128-bit UUIDs, which do not fit an int64: "+
		"give the field the type uuid.UUID (github.com/google/uuid) or string", engine.ErrInvalidConfig)
}
