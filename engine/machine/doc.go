// Package machine assigns snowflake machine IDs to running instances so users
// never number replicas by hand.
//
// A [Distributor] hands out a machine ID for an [Instance]: it reuses the
// instance's own ID, else reclaims one that is free or whose owner stopped
// heartbeating for longer than the safe-guard duration, else takes the next
// unused number, and past 2^machineBits fails with
// engine.ErrMachineIDOverflow. Every holding has a secret ([Holder]) that
// heartbeats must present, so a second process with one instance ID is told
// apart from the first. The registry (package idforge) keeps the ID with a
// lease tuned by [Settings]: it heartbeats the last timestamp while the
// process lives, fences the generator and reverts the ID on Close.
//
// Distributors in this package: [Manual] (a fixed number), [StatefulSet] (the
// Kubernetes pod ordinal) and [Default] (zero configuration). The SQL and
// Redis distributors live in engine/sqlstore and engine/redisstore;
// engine/machine/machinetest checks any implementation against the contract
// below. Those two stores also answer the operator's commands (`idforge
// store`) as an [Admin], which their OpenAdmin returns.
//
// It imports engine and engine/internal/distcheck (the argument checks it shares
// with the stores).
package machine
