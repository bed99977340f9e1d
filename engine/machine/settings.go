package machine

import "time"

// Settings tunes the lease that keeps a machine ID: how often it
// heartbeats, how long a silent holder keeps its ID, and how far ahead it
// reserves time. The zero value of every field means its documented
// default. The machine bits, the clock, the logger and the timestamps
// heartbeated belong to whoever runs the generator (the registry) and are
// not set here. Invalid combinations are refused with
// engine.ErrInvalidConfig naming the fields.
type Settings struct {
	// Heartbeat is the interval between heartbeats (default 250 ms: short,
	// because every heartbeat also reserves time ahead and is how a lease
	// notices a store that was reset). It must be shorter than SafeGuard
	// minus SkewMargin, and than Reservation. The default Reservation is
	// 4 × Heartbeat, so on a store with the default 2 s reset grace a
	// heartbeat of 500 ms or more needs an explicit, shorter Reservation.
	Heartbeat time.Duration
	// SafeGuard is how long an unstable instance may stay silent before
	// another may reclaim its machine ID (default 5 minutes). Keep it well
	// above the clock skew between hosts and the longest store outage to
	// ride out.
	SafeGuard time.Duration
	// SkewMargin is how long before the safe-guard runs out the lease stops
	// trusting itself (default a fifth of SafeGuard; negative: none). It
	// covers disagreement between the clock the store judges expiry by and
	// the clocks generators issue by. Where the store keeps time of its own
	// (a database or Redis server), the lease compares its clock with the
	// server's before distributing: it refuses a difference beyond
	// SkewMargin and warns beyond half of it; with no margin nothing is
	// compared.
	SkewMargin time.Duration
	// Reservation makes every heartbeat reserve time ahead: it stores the
	// newest timestamp used plus Reservation, and the generator refuses
	// timestamps past the last reservation stored. A process killed with
	// kill -9 has then issued nothing past what its machine-ID record says,
	// so a restart on the same machine ID that waits out the stored
	// timestamp cannot reuse a millisecond of its predecessor's, even if the
	// clock was stepped back while it was down. Default 4 × Heartbeat (1 s
	// with the default heartbeat); negative: none. The cost: a restart on
	// the same machine ID waits up to Reservation before issuing, acquiring
	// makes one more store call, and while the store is away snowflake IDs
	// stop once the reservation runs out, rather than after the safe-guard.
	// On a store with a reset grace (one that, once reset, hands nothing out
	// for a while) it must be shorter than the grace, and without a
	// reservation SafeGuard minus SkewMargin must: the lease is refused
	// otherwise.
	Reservation time.Duration
}
