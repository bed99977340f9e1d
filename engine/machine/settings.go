package machine

import "time"

// Settings tunes the lease that keeps a machine ID: how often it
// heartbeats and how long a silent holder keeps its ID. How far ahead each
// heartbeat reserves time is the store's ride-through window (the
// RideThrough setting of engine/sqlstore and engine/redisstore), shared by
// every process of the store. The zero value of every field means its documented
// default. The machine bits, the clock, the logger and the timestamps
// heartbeated belong to whoever runs the generator (the registry) and are
// not set here. Invalid combinations are refused with
// engine.ErrInvalidConfig naming the fields.
type Settings struct {
	// Heartbeat is the interval between heartbeats (default 250 ms: short,
	// because every heartbeat also reserves time ahead and is how a lease
	// notices a store that was reset). It must be at least 100 ms (each
	// heartbeat is a store round trip), shorter than SafeGuard minus
	// SkewMargin, and than the store's ride-through window (1 s by
	// default). Without a store that has one the lease reserves 4 ×
	// Heartbeat.
	Heartbeat time.Duration
	// SafeGuard is how long an unstable instance may stay silent before
	// another may reclaim its machine ID (default 5 minutes; at most 7
	// days). Keep it well above the clock skew between hosts and the
	// longest store outage to ride out.
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
}
