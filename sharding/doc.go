// Package sharding routes rows by their ID over databases and tables and
// measures how evenly they spread; its subpackages insert and read the rows
// through GORM or sqlx.
//
// A [Router] maps an ID to a [Shard] (database index and name, table index
// and name). [NewMod] builds the mod router over databases × tables, whose
// rules are [Expr] expressions or plain functions, so ShardingSphere's course
// example (db = id % 2, table = ((id+1) % 4)/2 + 1) is one line:
//
//	r, err := sharding.NewMod(sharding.Mod{
//		Databases: 2, DatabasePattern: "m%d",
//		Tables: 2, TablePattern: "course_%d", TableBase: 1,
//		TableRule: sharding.ID().Add(1).Mod(4).Div(2),
//	})
//
// [NewInterval] reads a snowflake ID's own timestamp and picks a
// time-bucketed table (order_2026, order_202611, order_20261121), with no
// lookup.
//
// Mod-N routing is only as even as the IDs' low bits. A snowflake that resets
// its sequence to 0 on every new tick gives low-traffic IDs that all end in
// the same bits, so id % 4 uses two shards of four; idforge's snowflake keeps
// the sequence cycling until it reaches its reset threshold, so every residue
// comes up in turn. [Measure] and [ShardCounter] measure this: per-shard
// counts, max/min ratio, standard deviation and the chi-square p-value
// against a uniform spread.
//
// The repositories live in subpackages, one per ORM, so a program imports
// only the ORM it uses: [github.com/idforge/idforge/sharding/shardgorm] and
// [github.com/idforge/idforge/sharding/shardsqlx]. Both fill IDs first,
// route every row, split a batch by shard and insert each part into its
// database and table (Create), read one shard (Find), and fan out over
// every shard (ForEach, Exec), with the same verbs and the same [Settings];
// this package holds what they share and imports neither ORM.
//
// Columns filled from a store's sequences ("chain", "segment") stay above
// what every shard holds when the store forgets them (wiped, or never
// initialised): before a model's first ID is drawn, a repository gives the
// registry the model's engine.Floor over every shard, the largest ID of its
// sequence columns in every table of every database the router lists (a
// table not created yet counts as 0), where the GORM plugin alone would
// read the model's own table. A router that cannot list its shards (an
// [IntervalRouter] without Start and End) gets a Floor answering
// engine.ErrNoFloor instead, so a store that forgot the sequence refuses it
// until the store has a Floor of its own that reads every table.
//
// Shard counts are bounded ([MaxDatabases], [MaxTables], [MaxShards]): a
// router lists every shard, and an absurd count is a configuration error,
// not a process out of memory.
package sharding
