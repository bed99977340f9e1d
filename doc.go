// Package idforge wires the engine into a ready [Registry]: a snowflake
// generator on a machine ID the library leases (and guards), and a segment
// chain per name drawn from a shared store. The GORM plugin (idplugin) and
// the sqlx helper (sqlhook) draw their IDs from such a registry.
//
//	st, _ := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true})
//	// (run `idforge store init` once on a new store, or give Floors: see AddFloor)
//	reg, err := idforge.New(ctx, idforge.Settings{Store: st, Namespace: "orders"})
//	defer reg.Close() // gives the machine ID back, stops prefetch workers
//
// Kinds, named by strings: "snowflake" (the shared default, name ""),
// "uuidv7" (RFC 9562 version 7 UUIDs, name "": assert the generator to
// engine.UUIDGenerator), and with a store "chain" (a lock-free segment chain
// per name) and "segment" (a synchronous single-segment generator per
// name); [Registry.Dated] adds dated numbers on chains.
//
// The registry owns what must agree between its parts: the layout decides
// the lease's machine bits, the lease fences the generator, the generator's
// newest timestamp is what the lease heartbeats, and each chain is named
// after its sequence. [Settings] has no way to change these; a setting that
// contradicts one is refused with engine.ErrInvalidConfig naming both.
//
// It imports the engine (its contracts, generators and machine
// distributors) and the top-level internal packages that hold the lease,
// the generator registry and dated chains; never an ORM, a driver or an
// integration, which import it.
package idforge
