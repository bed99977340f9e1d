// Package segmenttest helps test segment distributors: [Run] is the
// conformance suite every [segment.Distributor] must pass, and a store's
// Floor, epoch and restore handling with it, given the parts of a [Suite]
// (the SQL and Redis stores run it against the real servers).
package segmenttest
