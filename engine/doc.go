// Package engine holds the contracts every idforge generator and integration
// agrees on: [Generator], [UUIDGenerator], [Provider], [Floor], the [ID]
// type and the sentinel errors.
//
// engine imports only the standard library. Concrete generators live below it
// (engine/snowflake, engine/segment), stores beside them (engine/sqlstore,
// engine/redisstore), and integrations (gormplugin, sqlhook, sharding) import
// engine, never the other way round.
package engine
