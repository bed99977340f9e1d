// Package shardsqlx is the sharded repository over sqlx: it fills IDs from
// the `idgen` struct tags the GORM plugin reads, routes every row with a
// [sharding.Router], splits a batch by shard and inserts each part into its
// database and table; Get reads rows by ID and Find by shard key, Page and
// Count read every shard merged in order, Update and Delete change routed
// rows, ForEach and Exec fan out over every shard.
//
// Package [github.com/idforge/idforge/sharding/shardgorm] is the same
// repository over GORM, with the same verbs: moving from one to the other
// is a change of import. What sqlx does differently:
//
//   - sqlx has no hook to fill IDs, so [New] takes the engine.Provider
//     (an idforge registry) the IDs are drawn from, through an
//     [sqlhook.Helper];
//   - sqlx has no model, so there is no Migrate: create the tables with
//     [Repository.Exec] ("CREATE TABLE IF NOT EXISTS {table} (...)"), and
//     the repository's statements are written from the struct's `db`
//     columns (see [Repository.Create]);
//   - [Repository.DB] and [Repository.ForEach] hand out the *sqlx.DB: fill
//     the table into statements of yours with [Query], quoted as the
//     repository quotes it. Nothing checks that those statements stay in
//     the shard (database/sql gives no hook to see them); in a
//     repository of [Repository.In], ForEach is refused, as it would run
//     outside the transaction, and In asks the transaction which database
//     it is on.
//
// Columns filled from a store's sequence ("chain", "segment") get a Floor
// over every shard, as with GORM: see [New].
//
// The package imports sqlx, sqlhook, sharding and the shared internals;
// sharding never imports it back.
package shardsqlx
