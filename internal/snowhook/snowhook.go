// Package snowhook gives the one composition that runs a snowflake
// generator on a machine-ID lease (internal/leased) what engine/snowflake
// keeps from its users: a start after the last timestamp the lease found,
// the lease as the generator's fence, and the generator's newest timestamp
// and clock-wait count. Users never set these; the composition owns them.
// engine/snowflake fills [New] in when it is initialized. It imports engine.
package snowhook

import (
	"time"

	"github.com/idforge/idforge/engine"
)

// Start is how a generator on a lease starts and is guarded.
type Start struct {
	// LastTimestamp is the Unix millisecond time of the last ID (or
	// heartbeat) saved for the machine ID, 0 if unknown. Its tick counts as
	// used up: the first ID comes from a later tick. If the clock is behind
	// it by no more than the generator's MaxBackwards the first NextID
	// waits; further behind, New fails with engine.ErrClockBackwards.
	LastTimestamp int64
	// Fence, when set, guards the machine ID: NextID calls it with the last
	// Unix millisecond of the tick it is about to use, before every new
	// tick, and returns its error instead of an ID. It must be cheap and
	// safe for concurrent use.
	Fence func(unixMilli int64) error
}

// Generator is a running snowflake generator as the composition sees it.
type Generator interface {
	engine.Generator
	// MachineID returns the machine ID the generator issues under.
	MachineID() int64
	// LastTimestamp returns the Unix millisecond time of the tick of the
	// newest ID issued (or of Start.LastTimestamp's tick before the first),
	// 0 if none: what the lease heartbeats so a restart can wait it out.
	LastTimestamp() int64
	// BackwardsWaits returns how many NextID calls found the clock behind
	// the last tick issued and waited until it caught up.
	BackwardsWaits() int64
}

// New is snowflake.New with a start: settings must be a snowflake.Settings
// (the one type this package cannot name, since engine/snowflake imports
// it). Set by engine/snowflake at initialization.
var New func(machineID int64, settings any, start Start) (Generator, error)

// Layout is the arithmetic of a snowflake layout that engine/snowflake
// keeps private and internal/snowlayout reads, so it is written once.
type Layout interface {
	// Describe names the layout as the generator's errors do.
	Describe() string
	// MaxMachineID, MaxSequence and MaxTick are 2^bits - 1 of each part,
	// MaxID of all bits together.
	MaxMachineID() int64
	MaxSequence() int64
	MaxTick() int64
	MaxID() int64
	// TickTime is the start of a tick, in UTC.
	TickTime(tick int64) time.Time
	// Overflow is the error for a time past the layout's last tick.
	Overflow(t time.Time) error
}

// LayoutOf returns the arithmetic of a snowflake.Layout given as any. Set
// by engine/snowflake at initialization.
var LayoutOf func(layout any) Layout
