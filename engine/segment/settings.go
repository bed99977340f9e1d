package segment

import "time"

// Settings configures a chain (idforge.Settings.Chain). The zero value of every
// field means its documented default, so Settings{} is a working chain;
// fields that only concern the chain's prefetching (SafeDistance, Ahead, TTL)
// are validated but have no effect on the single-segment generator of the
// registry's "segment" kind. The name of the sequence, the logger and the
// clock belong to whoever runs the chain: the registry names each chain
// after its sequence and gives it its own Logger and Clock.
type Settings struct {
	// Step is the number of IDs per segment (default 1000; at most 2^32).
	// Every store call asks for a whole number of steps.
	Step int64
	// SafeDistance is how many segments (of Step IDs each) the chain keeps
	// fetched ahead of its callers when they are fed (default 2:
	// with the default step, 2,000 to 4,000 IDs ride out a store outage;
	// at most 2^28). It counts IDs not yet handed out, the current
	// segment's remainder included.
	SafeDistance int64
	// Ahead, when positive, keeps at least this much of current traffic
	// fetched ahead: the prefetch worker measures the rate callers take IDs
	// at (a mean weighted over about the last 10 s of the chain's clock,
	// read from counters the worker keeps anyway, so NextID pays nothing
	// more) and holds at least rate × Ahead IDs, in whole segments, never
	// fewer than SafeDistance nor more than the chain's maximum distance
	// (1,000,000 segments, lowered to what Step allows). A chain that holds its target rides out a store outage
	// of up to Ahead at a steady rate; when traffic falls the target falls
	// after it, halving at most once per prefetch period (1 s). The price is any prefetch's: the IDs
	// held ahead (up to twice the target) are lost on a restart, and
	// instances sharing a store interleave by as much. A chain with a Fence
	// stops serving what it holds once the store has not confirmed it for
	// the Fence, so an Ahead beyond the Fence would buy nothing and is
	// refused. Default 0: off, the distance is SafeDistance and what hunger
	// adds. At most 24 h.
	Ahead time.Duration
	// TTL discards fetched segments older than this instead of serving them
	// (default 0, none). An instance that sits on a
	// prefetched range for hours would otherwise insert IDs far below those
	// other instances are issuing now; with a TTL its IDs stay close to
	// theirs. The prefetch worker enforces it when it wakes, so an ID may be
	// served up to one prefetch period (1 s) after its segment expired. An idle
	// chain refetches its safe distance once per TTL. At most 7 days.
	TTL time.Duration
	// MaxWait bounds how long NextID waits for IDs when none are ready
	// (default 10 s: long enough to ride out a store failover, short enough
	// that a request without a deadline fails instead of hanging; at most
	// 24 h); ctx can end the wait earlier. A negative MaxWait waits as long
	// as ctx allows.
	MaxWait time.Duration
	// Fence, when positive, stops serving the IDs already held once the
	// store has not confirmed them for that long: NextID then waits, as on
	// a dry chain, for the store to answer, and fails with an error
	// wrapping engine.ErrStoreUnavailable when ctx or MaxWait ends first. A process cut off from a store that is wiped meanwhile would
	// otherwise go on serving ranges a newcomer may be handed again; with a
	// Fence shorter than the store's reset grace it stops before the
	// newcomer starts. The store confirms with each fetch, and on
	// engine/sqlstore and engine/redisstore with every operation of the
	// same store value (a machine-ID lease's heartbeats); an idle chain
	// fetches a step of its own when half the Fence passed unconfirmed.
	// The price: the chain no longer rides out store outages on what it
	// holds, and each NextID reads the clock. Default 0: off. A Fence is
	// at most the machine-ID lease's reservation, the store's ride-through
	// window (the RideThrough of engine/sqlstore and engine/redisstore:
	// when snowflake IDs stop too), and at most 24 h; a negative Fence
	// turns it on at that window. idforge.New refuses a negative Fence when
	// the lease reserves nothing (a store whose RideThrough is negative).
	Fence time.Duration
}
