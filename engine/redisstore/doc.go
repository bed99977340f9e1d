// Package redisstore keeps idforge's shared state in Redis through
// github.com/redis/go-redis/v9. A [Store] implements machine.Distributor and
// hands out a segment.Distributor per name ([Store.Segment]); every
// operation is one Lua script, one round trip, atomic on the server (but
// [Store.Counter], one GET). It also serves the operator's `idforge store`
// commands (see Operator commands below).
//
// [Open] accepts any [redis.Cmdable]: a *redis.Client, a *redis.ClusterClient,
// a *redis.Ring or a failover client. The caller owns the client and closes
// it.
//
// # Keys
//
// Every key starts with the prefix ([Settings.Prefix], default "{idforge}:")
// and carries one hash tag, so all of a store's keys live in one Redis
// Cluster slot (and on one Ring shard) and one script can check the epoch
// together with any of them. A prefix without a hash tag gets "{idforge}:"
// appended: the prefix "shop:" gives "shop:{idforge}:epoch".
//
//	<base>epoch                          string: the store's epoch token
//	<base>segment:<name>                 string: the last max ID handed out
//	<base>machine:<namespace>:instances  hash: instance ID -> machine ID
//	<base>machine:<namespace>:machines   hash: machine ID -> "lastTimestamp|stable|instance"
//	<base>machine:<namespace>:reclaim    sorted set: unstable owners' IDs by last timestamp
//	<base>machine:<namespace>:free       sorted set: free IDs by last timestamp
//	<base>machine:<namespace>:holders    hash: machine ID -> the secret of its live holding
//
// idforge's load is one script per segment range and per heartbeat, which
// one Redis node serves many times over; a cluster gives the store
// failover, not sharding. Give each store its own hash tag to spread
// several stores over a cluster.
//
// # Segments
//
// A fetch checks the counter against the caller's floor (the highest max ID
// this Store ever got for the name), then INCRBY step: the caller owns
// (max-step, max]. A name seen for the first time starts at [Settings.Start]
// (default 0): its first range is (start, start+step]. The start applies
// only when the key is created, so processes configured with different
// starts cannot make ranges overlap.
//
// # Machine IDs
//
// The machines hash holds every machine ID ever handed out in a namespace, so
// its length is the next unused number. Its value is the last timestamp known
// for the ID (the newest of the distribution times and the timestamps given
// to Guard and Revert, in Unix milliseconds), whether the owner is stable,
// and the owner's instance ID ("" when free). The instances hash is the
// reverse index for reuse. The free sorted set holds the free IDs and the
// reclaim sorted set the IDs of unstable owners, both scored by their last
// timestamp. Stable owners are in neither, so their IDs are never
// reclaimed. (A store written before the free set kept free IDs in reclaim
// at -inf; Distribute moves them over.) The holders hash records the
// secret of each live holding (machine.State.Holder), made at Distribute
// and dropped at Revert.
//
// Distribute reuses this instance's own ID, unless the instance is stable
// and another holding of it heartbeated within safeGuard (an error wrapping
// engine.ErrInstanceInUse); else takes the free ID with the lowest score
// <= now; else reclaims the lowest-scored ID of the reclaim set with a score
// <= now - safeGuard (the longest silent), removing the previous owner's
// mapping; else takes the next unused number; else the free ID stamped
// least far ahead of now; else fails with an error wrapping
// engine.ErrMachineIDOverflow. The returned State.LastTimestamp is the stored
// last timestamp before this call (0 for a new number): the generator waits
// until its clock passes it. Guard raises the stored timestamp to the one it
// is given if the instance still holds the ID under the holder it presents,
// else fails with engine.ErrMachineIDLost; it never lowers the stored
// timestamp. Revert stores the timestamp it is given (the newest one the
// generator used, which may be below what Guard reserved), ends the holding
// and frees the ID of an unstable instance; a stable one keeps it.
//
// "now" is read from [Settings.Clock] (default clock.System) and passed into
// the scripts, so every instance judges expiry by its own clock and tests can
// use clocktest.Fake. Instances whose clocks disagree by more than the safe-guard
// duration can reclaim each other's live IDs: keep the safe guard well above
// the clock skew. The registry's lease refuses a host whose clock is
// further from the Redis server's ([Store.ServerTime]) than the lease's skew
// margin.
//
// # Store resets
//
// The epoch key holds a token written when the store's state is first
// created. Every script checks the token the Store works under before it
// does anything. A Redis that forgot everything (restarted without
// persistence, FLUSHALL, a failover to an empty replica) has no token or
// another one: the call fails with an error wrapping engine.ErrStoreReset
// that names the store, the Store adopts the current epoch (creating one
// when there is none) and hands nothing out until [Settings.ResetGrace]
// (default 2 s) after that epoch's creation, so every process of the old
// epoch has seen its lease heartbeat fail and stopped. On adopting, the
// Store re-seeds every segment name it used with its floor.
//
// A store can also go back without losing its epoch: restored from an old
// RDB snapshot, a crash that lost writes not yet fsynced, a failover to a
// replica that had not received them. A fetch whose floor is above the
// counter sees it: the script raises the counter to the floor and replaces
// the epoch, so this process and every other one get ErrStoreReset, drop
// what they hold and wait the grace. [Open] on a
// Redis without an epoch creates one and waits the grace too: a first start
// and a wipe look the same, so the first start of a new store costs the
// grace (2 s by default).
//
// # Operator commands
//
// The machine.Admin of [OpenAdmin] serves `idforge store
// machines|release|chain`, as the SQL store's does. Machines and Release are one script each over the
// namespace's keys; Release refuses, in the same script, an ID whose holding
// stored a last timestamp within the reset grace of now (engine.ErrInstanceInUse)
// unless forced, and frees the ID as an unstable Revert would, keeping its
// last timestamp for the next holder. They ignore the epoch: an operator
// reads and acts on the store as it is. RaiseCounter is the segment
// script's raise under the epoch (the re-seed after a reset): the counter
// only goes up, so it stays at or above every process's floor.
//
// # Durability
//
// Open reads the persistence and eviction configuration of every node
// holding data (CONFIG GET, or INFO where CONFIG is disabled). Run Redis with
// appendonly yes and appendfsync always; then:
//
//   - restart (SHUTDOWN, or a crash: kill -9, power loss): the AOF holds
//     every acknowledged write; the store carries on, nothing repeats;
//   - restart without persistence (Open fails with [ErrVolatile] unless
//     [Settings.AllowVolatile]):
//     a store reset, detected as above; live processes stop and resume above
//     their floors, but IDs already written by processes that are gone may
//     repeat;
//   - appendfsync everysec or no (a warning at Open): a crash loses the last
//     second or more of acknowledged writes with the epoch intact; it is
//     seen as a reset only when a live process that got one of the lost
//     ranges fetches again, so a range (or machine ID) handed out in that
//     window can go out twice meanwhile, to a process that started after
//     the crash;
//   - RDB snapshots only (a warning at Open): a crash rolls back to the last
//     snapshot, with the same consequence;
//   - failover to a replica (Sentinel, Cluster): replication is
//     asynchronous, so the writes the replica had not received are lost,
//     with the same consequence (an empty replica is a plain reset). Prefer
//     primaries restarted from their AOF (a Cluster without replicas, as
//     .ci/run runs it), or use a SQL store where a failover must not lose
//     writes;
//   - eviction (maxmemory-policy allkeys-*, with a maxmemory set): Redis may
//     drop single keys under memory pressure while the epoch stays, which
//     no check can tell, so Open refuses it even with AllowVolatile. Use
//     noeviction or a volatile-* policy: idforge's keys have no TTL.
//
// Scripts need Redis 2.6 or later (tested on 7.0). They are sent with EVAL,
// not EVALSHA: they are small, Redis caches the compiled body, and a call
// stays one round trip even after a failover or SCRIPT FLUSH emptied the
// script cache.
//
// The package imports go-redis and the engine's contracts (machine,
// segment, clock, engine/internal); no integration.
package redisstore
