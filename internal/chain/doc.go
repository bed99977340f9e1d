// Package chain runs the sequences of the registry's "chain" and "segment"
// kinds: [Chain], the lock-free chain that keeps segments prefetched ahead
// of its callers, and [Single], one segment refilled synchronously. Both
// draw ranges from an engine/segment Distributor and are configured by the
// user's segment.Settings and by [Owned], what their runner (the registry,
// package idforge) sets: the sequence's name, the logger and the clock.
// [Validate] checks the settings before any chain is built.
//
// It imports engine, engine/clock, engine/segment and internal/outage.
package chain
