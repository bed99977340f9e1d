// Package snowflake generates time-ordered 64-bit IDs:
//
//	 63 bits at most (positive in a signed BIGINT)
//	+-----------------------------+-------------+--------------+
//	| tick (units since epoch)    | machine ID  | sequence     |
//	+-----------------------------+-------------+--------------+
//	  Default: 41 bits of ms        10 bits       12 bits
//
// A [Layout] fixes the bit split, the tick unit (millisecond or second) and
// the epoch, and decodes IDs back into time, machine and sequence, also in
// the friendly form 20260623131730192-1-0. Presets: [Default],
// [Seconds], and [JSSafe] / [JSSafeSeconds], which fit JavaScript's 53 bits.
//
// A [Generator] issues IDs for one machine ID. Unlike Twitter's snowflake it
// does not restart the sequence at 0 on every tick: it restarts only once
// the sequence has reached the layout's reset threshold, so
// low-traffic IDs do not all end in 0 and `id % n` shards them evenly.
// A sequence overflow waits for the next tick, a clock that steps back is
// waited out for a few milliseconds and is an error beyond that, and a layout
// whose timestamp ran out is an error, never a negative or repeated ID.
package snowflake
