// Package sharding routes rows by their ID over databases and tables, measures
// how evenly they spread, and inserts and reads them through GORM or sqlx.
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
// [Gorm] and [Sqlx] are the repository helpers: they fill IDs first (through
// the idplugin or idsqlx), route every row, split a batch by shard and
// insert each part into its database and table; find by ID queries one shard;
// [Gorm.Migrate] creates every physical table.
package sharding
