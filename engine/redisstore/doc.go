// Package redisstore keeps idforge's shared state in Redis through
// github.com/redis/go-redis/v9: a [segment.Distributor] on INCRBY and a
// [machine.Distributor] on Lua scripts. Every operation is one
// command, so one round trip, and atomic on the server.
//
// The distributors accept any [redis.Cmdable]: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or a failover client. The caller owns
// the client and closes it.
//
// # Keys
//
// All keys start with a prefix ([WithPrefix], default "idforge:"):
//
//	<prefix>segment:<name>                  string: the last max ID handed out
//	<prefix>machine:{<namespace>}:instances hash: instance ID -> machine ID
//	<prefix>machine:{<namespace>}:machines  hash: machine ID -> "lastTimestamp|stable|instance"
//	<prefix>machine:{<namespace>}:reclaim   sorted set: reclaimable machine IDs
//
// A segment is one key and needs nothing special on a cluster. The machine
// scripts touch the three keys of a namespace together; the {namespace} hash
// tag puts them in one cluster slot (and on one Ring shard), which a Lua script
// on Redis Cluster requires. A prefix may carry its own hash tag, such as
// "{idforge}:", to put every idforge key in one slot: the prefix's tag then
// wins and the namespace's keys still share a slot. For the same reason a
// namespace must not be empty or contain braces, and a prefix must not
// contain an empty tag "{}".
//
// # Segments
//
// NextMaxID is INCRBY key step: the caller owns (max-step, max]. A name seen
// for the first time starts at the start offset ([WithStart], default 0): its
// first range is (start, start+step]. With a non-zero start the fetch is a
// short script that sets the start if the key is absent and then increments,
// still one round trip. The start applies only when the key is created, so
// processes configured with different starts cannot make ranges overlap.
//
// # Machine IDs
//
// The machines hash holds every machine ID ever handed out in a namespace, so
// its length is the next unused number. Its value is the last timestamp known
// for the ID (the newest of the distribution times and the timestamps given
// to Guard and Revert, in Unix milliseconds), whether the owner is stable,
// and the owner's instance ID ("" when free). The instances hash is the
// reverse index for reuse. The reclaim sorted set holds the IDs a
// newcomer may take: free IDs with score -inf, and IDs of unstable owners
// scored by their last timestamp. Stable owners are not in it, so their IDs
// are never reclaimed.
//
// Distribute runs one script: reuse this instance's own ID; else reclaim the
// lowest-scored ID of the reclaim set with a score <= now - safeGuard (free
// IDs first, then the longest silent), removing the previous owner's mapping;
// else take the next unused number; else fail with an error wrapping
// engine.ErrMachineIDOverflow. The returned State.LastTimestamp is the stored
// last timestamp before this call (0 for a new number): the generator waits
// until its clock passes it. Guard raises the stored timestamp to the one it
// is given (a machine.Lease gives the heartbeat time) if the instance still
// holds the ID, else fails with engine.ErrMachineIDLost. Revert raises it to
// the generator's last timestamp and frees the ID of an unstable instance; a
// stable one keeps it. Stored timestamps never go down.
//
// "now" is read from the distributor's clock ([WithClock], default
// clock.System) and passed into the scripts, so every instance judges expiry
// by its own clock and tests can use clock.Fake. Instances whose clocks
// disagree by more than the safe-guard duration can reclaim each other's live
// IDs: keep the safe guard well above the clock skew (CosId's default is five
// minutes).
//
// # Durability
//
// Redis acknowledges a write before it is on disk or on a replica. If the
// server crashes, or a replica is promoted, the last writes can be lost: a
// segment range is then handed out again (duplicate IDs), and a machine ID can
// go to a second live instance until the first one's next Guard finds it lost
// (engine.ErrMachineIDLost) and its lease stops its generator. Run Redis with
// appendonly yes and appendfsync always and without failover to asynchronous
// replicas, or use a SQL store where that is not acceptable.
//
// Scripts need Redis 2.6 or later (tested on 7.0). They are sent with EVAL,
// not EVALSHA: they are small, Redis caches the compiled body, and a call
// stays one round trip even after a failover or SCRIPT FLUSH emptied the
// script cache.
package redisstore
