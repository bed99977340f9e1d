// Package regstats carries the figures of a registry (package idforge)
// that only its own tools read: the recent store calls, each chain's
// prefetch detail and what the generators did while the store was down,
// which the state page of `idforge serve` and the
// Prometheus collector show. Registry.Stats keeps to what users read.
// The root package fills [Of] in when it is initialized; this package
// imports only the standard library.
package regstats

import "time"

// Detail is what [Of] reads from a registry beside its Stats.
type Detail struct {
	// Calls are the recent store calls, newest first: the last 32 segment
	// fetches (op "next_max_id") and the last 8 machine-ID calls (ops
	// "distribute", "guard", "revert").
	Calls []Call
	// Chains are the chains' prefetch figures, by sequence name.
	Chains map[string]Chain
	// Outage is the store outage going on (zero while the store answers);
	// LastOutage the last one that ended (zero: none yet).
	Outage, LastOutage Outage
}

// Outage is a stretch of time the store did not answer: from a store call
// that failed with engine.ErrStoreUnavailable or a deadline to the next
// call it answered. Meanwhile snowflake IDs ride through on the lease and
// chains serve what they fetched ahead; Served and Refused say how that
// went.
type Outage struct {
	// Start is when the first failed call began; zero: no outage.
	Start time.Time
	// End is when the store answered again; zero while the outage lasts.
	End time.Time
	// Served counts the IDs handed out during the outage, Refused the IDs
	// asked for and not handed out (one per failed NextID, the rest of the
	// batch for a failed NextIDs), by generator kind. Dated chains, drawn
	// outside the registry's counting, are not in them.
	Served, Refused map[string]int64
}

// Total returns Served and Refused summed over the kinds.
func (o Outage) Total() (served, refused int64) {
	for _, n := range o.Served {
		served += n
	}
	for _, n := range o.Refused {
		refused += n
	}
	return served, refused
}

// Duration is how long the outage lasted, or has lasted until now while
// it goes on; zero without one.
func (o Outage) Duration(now time.Time) time.Duration {
	switch {
	case o.Start.IsZero():
		return 0
	case o.End.IsZero():
		return now.Sub(o.Start)
	}
	return o.End.Sub(o.Start)
}

// Call is one store call.
type Call struct {
	Time     time.Time
	Op       string // next_max_id, distribute, guard, revert
	Name     string // the sequence, or the namespace of a machine-ID call
	Duration time.Duration
	Err      string
}

// Chain is one chain's prefetching.
type Chain struct {
	// Step is the number of IDs per segment.
	Step int64
	// PrefetchDistance is the prefetch distance in segments: the safe
	// distance, or more while callers are hungry.
	PrefetchDistance int64
	// Fetches counts successful store calls; Failures failed ones.
	Fetches, Failures int64
	// Hungry counts draws that found no ID ready and waited.
	Hungry int64
	// LastError is the last failed fetch, nil once the store answers again.
	LastError error
}

// Of returns the detail of reg, an *idforge.Registry. Set by the root
// package at initialization.
var Of func(reg any) Detail
