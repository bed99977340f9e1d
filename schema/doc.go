// Package schema owns the tables of the SQL store (engine/sqlstore): the
// dialects (MySQL/MariaDB, PostgreSQL, SQLite) and the DDL of each, for a
// migration tool of your own, as `idforge schema` prints it.
// sqlstore.Open creates the tables itself with Settings.CreateTables,
// tells the dialect of a database when Settings.Dialect is not set, and
// brings tables of an older DDL up to date.
//
// It imports only the standard library and the engine's errors.
package schema
