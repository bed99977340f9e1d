// Package segment is the contract of the strictly increasing IDs drawn
// from ranges (segments) a shared store hands out: the store's side, a
// [Distributor] of one named sequence, and the user's side, the [Settings]
// of the chains and single-segment generators the registry (package
// idforge) runs for its "chain" and "segment" kinds. The chain keeps
// segments prefetched ahead so callers only ever pay an atomic add; the
// "segment" kind holds one segment and refills it synchronously. Both run
// in the registry; this package holds what users write and what stores
// implement.
//
// IDs are strictly increasing per chain and, across instances
// sharing a store, unique and roughly increasing: instances interleave by at
// most the IDs each holds ahead (a few steps). Defaults are explained on
// the [Settings] fields. Distributors for SQL databases and Redis live in
// engine/sqlstore and engine/redisstore; engine/segment/segmenttest checks
// any [Distributor] against the contract and provides an in-memory fake.
//
// It imports only the standard library.
package segment
