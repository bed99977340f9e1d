// Package schema owns the tables of the SQL store: their DDL per dialect
// (MySQL/MariaDB, PostgreSQL, SQLite), the dialects and how to tell them
// from a driver or a server, Ensure to create the tables and Migrate to
// bring older ones up to date. engine/sqlstore runs its statements on these
// tables and `idforge schema` prints the DDL.
//
// It imports only the standard library and the engine's errors.
package schema
