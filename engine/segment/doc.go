// Package segment generates strictly increasing IDs from ranges (segments)
// handed out by a shared store: the lock-free chain the registry's "chain" kind
// runs keeps segments prefetched ahead so callers only ever pay an atomic add. (The registry's
// "segment" kind, a single segment refilled synchronously, is built here
// too, reached through internal/segmenthook.)
//
// IDs are strictly increasing per chain and, across instances
// sharing a store, unique and roughly increasing: instances interleave by at
// most the IDs each holds ahead (a few steps). Defaults are explained on
// the [Settings] fields. Distributors for SQL databases and Redis live in
// engine/sqlstore and engine/redisstore; engine/segment/segmenttest checks
// any [Distributor] against the contract and provides an in-memory fake.
//
// It imports engine, engine/clock and the internal packages it shares with
// the registry (internal/segmenthook) and the stores' outage logging.
package segment
