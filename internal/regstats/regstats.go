// Package regstats carries the figures of a registry (package idforge)
// that only its own tools read: the recent store calls and each chain's
// prefetch detail, which the state page of `idforge serve` and the
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
