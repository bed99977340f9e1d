// Package snowflake generates time-ordered 64-bit IDs:
//
//	 63 bits at most (positive in a signed BIGINT)
//	+-----------------------------+-------------+--------------+
//	| tick (units since epoch)    | machine ID  | sequence     |
//	+-----------------------------+-------------+--------------+
//	  Default: 41 bits of ms        10 bits       12 bits
//
// A [Layout] fixes the bit split, the tick unit (millisecond or second) and
// the epoch, and decodes IDs back into time, machine and sequence
// ([Layout.Decode]). Presets: [Default],
// [Seconds], and [JSSafe] / [JSSafeSeconds], which fit JavaScript's 53 bits.
//
// A [Generator] issues IDs for one machine ID. Unlike Twitter's snowflake it
// does not restart the sequence at 0 on every tick: it restarts only once
// the sequence has reached the layout's reset threshold, so
// low-traffic IDs do not all end in 0 and `id % n` shards them evenly.
// A sequence overflow waits for the next tick, and a layout whose timestamp
// ran out is an error, never a negative or repeated ID.
//
// A running generator keeps time on a steady time base of its clock: from the wall
// time at start it follows the monotonic clock, re-synced forward to the
// wall clock whenever that is ahead, never backward. A wall clock stepped
// back, by a millisecond or an hour, never reaches it: no refusal, no wait,
// no duplicate; the IDs run ahead of the wall clock until it catches up.
// (bwmarrin/snowflake runs on monotonic time too.) What a steady time base
// cannot see is waited out for a few milliseconds and is an error beyond
// that: a last timestamp saved by a previous run on the machine ID ahead of
// the wall clock at start (the registry's lease passes it), and a clock with
// no monotonic reading stepping back. A lease fencing the generator runs on
// the same time base.
//
// [Resume] starts a generator on a machine ID taken over from earlier
// holders: after the last timestamp they may have used, and fenced by a
// lease that refuses once the machine ID may be someone else's. The
// registry (package idforge) starts its generator so on its lease.
//
// It imports engine, engine/clock and engine/internal/timebase (waiting out
// a clock step back).
package snowflake
