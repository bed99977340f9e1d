// Package shardgorm is the sharded repository over GORM: it fills IDs
// through the idforge GORM plugin, routes every row with a
// [sharding.Router], splits a batch by shard and inserts each part into its
// database and table; Get reads rows by ID and Find by shard key, Page and
// Count read every shard merged in order, Update and Delete change routed
// rows, ForEach and Exec fan out over every shard, Migrate creates every
// physical table.
//
// Package [github.com/idforge/idforge/sharding/shardsqlx] is the same
// repository over sqlx, with the same verbs: moving from one to the other
// is a change of import. What GORM does differently:
//
//   - IDs come from the plugin registered on each *gorm.DB
//     (db.Use(idplugin.New(...))), so [New] takes no generator provider;
//   - [Repository.Migrate] creates the tables from the model (sqlx has no
//     model: run the CREATE TABLE through Exec);
//   - the sessions of [Repository.DB] and [Repository.ForEach] are bound
//     to their shard: a callback refuses a write through them that would
//     reach another shard.
//
// Columns filled from a store's sequence ("chain", "segment") get a Floor
// over every shard: see [New].
//
// The package imports GORM, the GORM plugin, sharding and the shared
// internals; sharding never imports it back.
package shardgorm
