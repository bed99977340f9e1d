// Package integration runs idforge against the real servers, across package
// boundaries: segment chains, machine-ID leases and registries built on
// engine/sqlstore (SQLite, MariaDB, PostgreSQL) and engine/redisstore, as
// several instances with connections of their own would use them.
//
// What it proves, per store:
//
//   - TestSixteenInstancesShareOneSegment: 16 instances, each with its own
//     pool or client, store and chain, draw 1,000,000 IDs together from one
//     name: none twice, each instance strictly increasing, and every ID the
//     store handed out either issued or counted as discarded by a chain's
//     Close, so nothing is lost.
//   - TestStoreOutage: with the store behind tests/faultproxy, a chain
//     serves exactly what it had prefetched after the cut, then fails within
//     its ctx deadline with an error matching engine.ErrSegmentExhausted and
//     naming the store's failure, and recovers by itself after the restore
//     without repeating an ID; a machine-ID lease rides out failed heartbeats
//     within its window, refuses past it, and is confirmed again after the
//     restore.
//   - TestPartitionedDuringReset: a process cut off from the store by the
//     fault proxy while the store is wiped stops issuing when its lease's
//     reservation runs out, before the store's reset grace lets a newcomer
//     issue on the same machine ID: no snowflake ID is issued by both. With
//     the reservation off and the ResetGrace check bypassed, the same run
//     finds IDs issued twice.
//   - TestRegistryOnStore: idforge.New on each store hands two instances
//     different store-assigned machine IDs (the snowflake IDs decode to
//     them), draws the "chain" and "segment" kinds from the store by name,
//     and gives a closed instance's machine ID to the next one.
//
// What it leaves to the stores' own tests, which run per store already: the
// machine.Distributor contract through engine/machine/machinetest (64
// instances racing for 6 machine bits, the 65th overflowing; an expired ID
// reclaimed; a stable one kept), the segment.Distributor contract through
// engine/segment/segmenttest, and the round trips per call
// (engine/sqlstore's TestSegmentRoundTrips and TestMachineRoundTrips count
// driver statements; engine/redisstore's TestSegmentFetchIsOneRoundTrip and
// TestMachineOneRoundTripPerCall count commands).
//
// Servers come from tests/testdb: a test whose server is down is skipped,
// or fails when IDFORGE_REQUIRE_SERVERS=1.
package integration
