// Package sharding routes rows by their ID over databases and tables and
// measures how evenly they spread; its subpackages insert and read the rows
// through GORM or sqlx.
//
// A [Router] maps an ID to a [Shard] (database index and name, table
// name). [NewMod] builds the router over databases × tables, whose rules
// are ShardingSphere's inline expressions, so its course example (db = id
// % 2, table = ((id+1) % 4)/2 + 1) is one line:
//
//	r, err := sharding.NewMod(sharding.Mod{
//		Databases: "m{0..1}", Tables: "course_{1..2}",
//		TableRule: "(id+1)%4/2+1",
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
// comes up in turn. [Measure] measures this from per-shard counts: the
// max/min ratio and the chi-square p-value against a uniform spread.
//
// The repositories live in subpackages, one per ORM, so a program imports
// only the ORM it uses: [github.com/idforge/idforge/sharding/shardgorm] and
// [github.com/idforge/idforge/sharding/shardsqlx]. Both fill IDs first,
// route every row, split a batch by shard and insert each part into its
// database and table (Create), read rows by ID (Get) and by shard key
// (Find), read pages and counts over every shard (Page, Count), update
// and delete routed rows (Update, Delete), and fan out over every shard
// (ForEach, Exec), with the same verbs, the same [Settings] and the same
// [Query]; this package holds what they share and imports neither ORM:
// only the standard library, the engine (its contracts, clock and
// snowflake layouts) and internal/snowlayout (a layout's description).
//
// # Reads and writes over several shards
//
// A [Query] selects rows by shard key (Key: one shard), by ID (IDs: their
// shards) or by a condition of yours (Where: every shard). A call reaching
// several shards runs [Settings.Parallel] of them at a time; when some
// fail, its error is a [FanoutError] listing those that answered. Page
// merges the shards' ordered lists (a k-way merge), asking each for its
// share of the page first and again only for what may be missing, and
// pages by keyset: the last row of a page is the next one's After.
//
// # Owner-keyed IDs
//
// Rows routed by an owner ([Settings.ShardKey] names e.g. CustomerID) live
// in their owner's shard, but a plain ID does not tell which.
// [Settings.OwnerResidues] makes Create compose each ID as value ×
// residues + owner mod residues ([Router.OwnerID]), so that the ID routes
// like its owner: a row is found by its own ID and by its owner with no
// lookup table. The owner's residue is a field of the layout below the
// value drawn, so IDs are as unique as the values; residues must be a
// multiple of the shard count (of every count to grow to, so that stored
// IDs keep routing with their owners when shards are added), and the
// value must leave room for them in 63 bits.
//
// # Writing a batch
//
// Create writes each shard's part in a transaction of its own, in INSERTs
// of at most [Settings.BatchSize] rows, cut shorter at the database's
// limit on bind parameters: a part is all-or-nothing, whatever the ORM's
// settings (GORM's SkipDefaultTransaction included), a single row too. A
// batch spanning shards is not atomic: a failed part is a [ShardError]
// that lists its rows and every row stored, and says
// whether the failed part was rolled back or, when the connection failed
// during COMMIT, may be stored ([ErrOutcomeUnknown]). Create is
// idempotent: a row whose ID (its integer primary key; the "id" column on
// sqlx) was set before the call and is found stored in its shard is
// skipped, so calling Create again with the same rows,
// which now hold their IDs, finishes the batch without duplicates. A
// single row whose outcome is unknown is read back with Find by the ID it
// holds.
//
// # Transactions
//
// A database transaction holds one database, so a repository offers none
// across shards, and no distributed transaction. The repositories' In(key,
// tx) joins a transaction the caller began on key's database: Create, Get,
// Find, Page, Count, Update and Delete run in it, bound to key's shard (rows of another shard are refused
// with [ErrWrongShard] before anything is written), and commit or roll
// back with it; a repository's own Create inside the caller's transaction
// would not. GORM's DB(key) and ForEach hand out sessions
// bound to their shard the same way. For rows that must change together:
// route them by one key ([Settings.ShardKey]) so that they share a shard and one
// transaction; otherwise write each shard's part on its own and make every
// step idempotent, as Create is, retrying until all are done (and, where
// a later step may fail for good, undo the earlier ones with steps of
// their own).
//
// # Table names
//
// Both repositories quote every table and column name in the statements
// they write, {table} in Exec included, as GORM quotes names: a table or
// column named by a
// keyword ("order"), by digits, or in upper case on PostgreSQL, which folds
// unquoted names, is the same table to both. Statements of yours through
// shardsqlx's DB and ForEach fill {table} quoted with shardsqlx.Query.
//
// Columns filled from a store's sequences ("chain", "segment") stay above
// what every shard holds when the store forgets them (wiped, or never
// initialised): before a model's first ID is drawn, a repository gives the
// registry the model's engine.Floor over every shard, the largest ID of its
// sequence columns in every table of every database the router lists (a
// table not created yet counts as 0), where the GORM plugin alone would
// read the model's own table. A router that cannot list its shards (an
// interval router without Start and End) gets a Floor answering
// engine.ErrNoFloor instead, so a store that forgot the sequence refuses it
// until the store has a Floor of its own that reads every table.
//
// Shard counts are bounded (4,096 databases, 65,536 tables, 65,536 shards
// or interval tables): a router lists every shard, and an absurd count is
// a configuration error, not a process out of memory.
package sharding
