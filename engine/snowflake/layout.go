package snowflake

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

// unit returns the tick length of a valid layout: a zero Unit is a
// millisecond.
func (l Layout) unit() time.Duration {
	if l.Unit == 0 {
		return time.Millisecond
	}
	return l.Unit
}

// seconds reports whether the layout ticks in seconds.
func (l Layout) seconds() bool { return l.Unit == time.Second }

// unitName returns "ms" or "s" for a valid unit.
func unitName(u time.Duration) string {
	switch u {
	case 0, time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	}
	return u.String()
}

// resetEveryTick as [Layout.SequenceResetThreshold] restarts the sequence at
// 0 on every new tick, as Twitter's snowflake and bwmarrin/snowflake do. Under
// low traffic every ID then ends in the same low bits and `id % 2^k` sends
// them all to one shard; it exists for compatibility and comparison only.
const resetEveryTick int64 = -1

// defaultEpoch is the presets' epoch, 2019-12-24T16:00:00Z (1577203200000 ms).
var defaultEpoch = time.Date(2019, 12, 24, 16, 0, 0, 0, time.UTC)

// Presets, all with the epoch 2019-12-24T16:00:00Z (Unix 1577203200000 ms).
// Layouts are values: copy one and change a field to derive your own.
var (
	// Default is 41 bits of milliseconds (until 2089), 10 machine bits, 12
	// sequence bits: 4,096,000 IDs/s per machine, 1024 machines.
	Default = Layout{Epoch: defaultEpoch, TimestampBits: 41, MachineBits: 10, SequenceBits: 12, Unit: time.Millisecond}
	// Seconds is 31 bits of seconds (until 2088-01-11), 10 machine bits, 22
	// sequence bits: 4,194,304 IDs/s per machine, with no wait at the tick
	// boundary for bursts up to that size.
	Seconds = Layout{Epoch: defaultEpoch, TimestampBits: 31, MachineBits: 10, SequenceBits: 22, Unit: time.Second}
	// JSSafe fits 53 bits, so IDs survive JavaScript's Number: 41 bits of
	// milliseconds, 3 machine bits, 9 sequence bits (512,000 IDs/s, 8 machines).
	JSSafe = Layout{Epoch: defaultEpoch, TimestampBits: 41, MachineBits: 3, SequenceBits: 9, Unit: time.Millisecond}
	// JSSafeSeconds fits 53 bits with second ticks: 31/3/19 (524,288 IDs/s, 8 machines).
	JSSafeSeconds = Layout{Epoch: defaultEpoch, TimestampBits: 31, MachineBits: 3, SequenceBits: 19, Unit: time.Second}
)

// minSpan is the shortest life a layout may have: fewer timestamp bits than
// this are a typo, not a design.
const minSpan = 365 * 24 * time.Hour

// Layout is a snowflake bit layout:
//
//	id = tick << (MachineBits+SequenceBits) | machine << SequenceBits | sequence
//
// where tick counts Units since Epoch. IDs have at most 63 bits, so they stay
// positive in a signed BIGINT. A Layout is a plain value; [Layout.Validate]
// says whether it can work.
type Layout struct {
	// Epoch is tick 0. It must be a whole Unit, not before 1970 and not in
	// the future. The presets use 2019-12-24T16:00:00Z.
	Epoch time.Time
	// TimestampBits hold the tick; they must last at least a year (Epoch + 2^TimestampBits ticks).
	TimestampBits int
	// MachineBits hold the machine ID; 0 is allowed for a single generator.
	MachineBits int
	// SequenceBits number the IDs within one tick; at least 1.
	SequenceBits int
	// Unit is the tick length: time.Millisecond or time.Second; 0 means
	// time.Millisecond. Other durations are invalid.
	Unit time.Duration
	// SequenceResetThreshold decides when a new tick restarts the sequence at
	// 0: only once the sequence has reached the threshold; below it the
	// sequence continues (+1) across ticks, so the low bits of low-traffic IDs
	// keep cycling and `id % n` spreads them evenly.
	//
	// 0 means the default, 2^(SequenceBits-1)-1 (2047 for 12 bits; 1 for a
	// single sequence bit). Any value in [1, 2^SequenceBits-1] is used as is;
	// maxSequence makes the sequence cycle through its whole range.
	// [resetEveryTick] restarts at 0 on every tick. Under saturation every
	// tick ends past any threshold, so the threshold never costs throughput.
	SequenceResetThreshold int64
}

// Validate reports whether the layout can work, with an error wrapping
// engine.ErrInvalidConfig that says what is wrong.
func (l Layout) Validate() error {
	if err := l.check(); err != nil {
		return err
	}
	if now := time.Now(); l.Epoch.After(now) {
		return l.invalid("epoch %s is in the future", l.Epoch.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// check is Validate without the clock: what Decode and Compose need.
func (l Layout) check() error {
	tb, mb, sb := l.TimestampBits, l.MachineBits, l.SequenceBits
	switch {
	case tb < 0 || mb < 0 || sb < 0:
		return l.invalid("bit counts must not be negative")
	case tb > 63 || mb > 63 || sb > 63 || tb+mb+sb > 63:
		return l.invalid("%d+%d+%d = %d bits, at most 63 fit a signed int64", tb, mb, sb, tb+mb+sb)
	case sb == 0:
		return l.invalid("sequence bits must be at least 1")
	case l.Unit != 0 && l.Unit != time.Millisecond && l.Unit != time.Second:
		return l.invalid("unit %v is neither time.Millisecond nor time.Second", l.Unit)
	case l.Epoch.IsZero():
		return l.invalid("epoch is not set")
	case l.Epoch.Before(time.Unix(0, 0)):
		return l.invalid("epoch %s is before 1970", l.Epoch.UTC().Format(time.RFC3339Nano))
	case int64(l.Epoch.Nanosecond())%int64(l.unit()) != 0:
		return l.invalid("epoch %s is not a whole %s", l.Epoch.UTC().Format(time.RFC3339Nano), unitName(l.Unit))
	}
	if minTicks := int64(minSpan / l.unit()); mask(tb)+1 < minTicks {
		return l.invalid("%d timestamp bits of %v last only %v, less than a year",
			tb, unitName(l.Unit), time.Duration(mask(tb)+1)*l.unit())
	}
	if t := l.SequenceResetThreshold; t != resetEveryTick && (t < 0 || t > l.maxSequence()) {
		return l.invalid("sequence reset threshold %d is outside [0, %d] (or -1: reset every tick)", t, l.maxSequence())
	}
	return nil
}

func (l Layout) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: layout %s: %s", engine.ErrInvalidConfig, l.String(), fmt.Sprintf(format, args...))
}

// String names the layout as errors do, e.g. "41/10/12 ms since
// 2019-12-24T16:00:00Z", with the sequence reset threshold when set.
func (l Layout) String() string {
	s := fmt.Sprintf("%d/%d/%d %v since %s", l.TimestampBits, l.MachineBits, l.SequenceBits,
		unitName(l.Unit), l.Epoch.UTC().Format(time.RFC3339Nano))
	if l.SequenceResetThreshold != 0 {
		s += fmt.Sprintf(" reset threshold %d", l.SequenceResetThreshold)
	}
	return s
}

// mask returns 2^bits - 1, or 0 for a bit count outside [0, 63].
func mask(bits int) int64 {
	if bits < 0 || bits > 63 {
		return 0
	}
	return int64(uint64(1)<<bits - 1)
}

// maxMachineID is the largest machine ID: 2^MachineBits - 1.
func (l Layout) maxMachineID() int64 { return mask(l.MachineBits) }

// maxSequence is the largest sequence number within a tick: 2^SequenceBits - 1.
func (l Layout) maxSequence() int64 { return mask(l.SequenceBits) }

// maxTick is the last tick the timestamp bits can hold: 2^TimestampBits - 1.
func (l Layout) maxTick() int64 { return mask(l.TimestampBits) }

// maxID is the largest ID of the layout: 2^(all bits) - 1 (2^53-1 for JSSafe).
func (l Layout) maxID() int64 { return mask(l.TimestampBits + l.MachineBits + l.SequenceBits) }

// resetThreshold returns the sequence reset threshold in effect: the default
// when SequenceResetThreshold is 0, otherwise the field (resetEveryTick included).
func (l Layout) resetThreshold() int64 {
	if l.SequenceResetThreshold != 0 {
		return l.SequenceResetThreshold
	}
	return max(mask(l.SequenceBits-1), 1)
}

// expiry is the moment the timestamp runs out: Epoch + 2^TimestampBits ticks.
// A generator fails with engine.ErrTimestampOverflow from then on.
func (l Layout) expiry() time.Time { return l.tickTime(l.maxTick() + 1) }

// tickTime is the start of a tick, in UTC.
func (l Layout) tickTime(tick int64) time.Time {
	if l.seconds() {
		return time.Unix(l.Epoch.Unix()+tick, 0).UTC()
	}
	return time.UnixMilli(l.Epoch.UnixMilli() + tick).UTC()
}

func (l Layout) overflow(t time.Time) error {
	return fmt.Errorf("%w: %s is past the end of %s (%s)", engine.ErrTimestampOverflow,
		t.UTC().Format(time.RFC3339Nano), l.String(), l.expiry().Format(time.RFC3339Nano))
}

// Decode splits id into the start of its tick (UTC), its machine ID and its
// sequence number within the tick. Negative IDs and IDs above the layout's
// largest, 2^(all bits)-1, are errors wrapping engine.ErrInvalidID; a layout
// that cannot hold IDs wraps engine.ErrInvalidConfig.
func (l Layout) Decode(id int64) (t time.Time, machine, seq int64, err error) {
	if err := l.check(); err != nil {
		return time.Time{}, 0, 0, err
	}
	if id < 0 || id > l.maxID() {
		return time.Time{}, 0, 0, fmt.Errorf("%w: %d is outside [0, %d] of %s", engine.ErrInvalidID, id, l.maxID(), l.String())
	}
	tick := id >> (l.MachineBits + l.SequenceBits)
	return l.tickTime(tick), id >> l.SequenceBits & l.maxMachineID(), id & l.maxSequence(), nil
}
