// Package sqlstore keeps segment sequences and machine-ID assignments in an
// SQL database through database/sql: MySQL/MariaDB, PostgreSQL and SQLite
// (3.35 or later). schema.DDL gives the tables' CREATE statements per dialect
// (`idforge schema` prints them); [Settings.CreateTables] creates them.
//
// A [Store] binds a *sql.DB to its dialect. It implements
// machine.Distributor itself and hands out a segment.Distributor per name
// ([Store.Segment]). It runs prepared statements, prepared on each pooled
// connection at first use:
//
//   - a segment fetch is one statement, one round trip, on every dialect:
//     UPDATE … RETURNING on PostgreSQL and SQLite, UPDATE … SET last_max_id
//     = LAST_INSERT_ID(…) on MySQL/MariaDB, whose result carries the new
//     maximum (a new name's first fetch also inserts its row);
//   - a machine ID is claimed with one conditional UPDATE that prefers the
//     instance's own row, then a free or expired one not stamped ahead of
//     the clock, and re-checks that choice against racing writers; only
//     when none is left is the next number inserted, guarded by the primary
//     key. The claim records a new holder secret, which heartbeats and
//     releases must present. [Store.Distribute] lists the round trips per
//     path and dialect;
//   - [Store.ServerTime] reads the database server's clock, for the
//     registry's lease to check the host's clock against.
//
// # Store resets
//
// The meta table holds the store's epoch, a token written when the store's
// state is first created. Every statement that hands something out or
// heartbeats checks the token the Store works under, in the same statement.
// When the tables were emptied, dropped and recreated, or restored from an
// old backup made before the epoch, the token is missing or different: the
// call fails with an error wrapping engine.ErrStoreReset, the Store adopts
// the epoch now stored (creating one when there is none) and hands nothing
// out until [Settings.ResetGrace] after that epoch's creation, so every
// process of the forgotten epoch has stopped (its heartbeat fails or, cut
// off from the store, its reservation runs out). On adopting a new epoch the Store re-seeds every segment name it
// used with the highest maximum it ever got for it (its floor). [Open] on a
// store with no epoch creates one and waits the grace too: a first start and
// a wipe look the same.
//
// Each segment fetch also sends its floor: a counter below it means the
// store went back without changing its epoch (a backup restored over it, a
// failover to a replica that had not received the last commits). The Store
// then replaces the epoch, so every process sees a reset, and raises the
// counter to the floor.
//
// # Durability
//
// The database's durability is the store's: a committed fetch or claim
// survives a restart and a crash with the databases' durable defaults
// (InnoDB innodb_flush_log_at_trx_commit=1, PostgreSQL fsync and
// synchronous_commit on, SQLite synchronous FULL). A failover to a replica
// that had not received the last commits (asynchronous replication), or a
// backup restored over the tables, keeps the epoch: it is seen as a reset
// only when a live process that got one of the lost ranges fetches again,
// so a lost range (or machine ID) can go out twice meanwhile, to a process
// that started after the failover. Use synchronous replication (PostgreSQL
// with a synchronous standby, MariaDB semi-synchronous) where a failover
// must not lose commits, and empty the meta table after restoring a backup:
// that makes it a plain reset.
//
// The package imports database/sql, schema (the tables and dialects), the
// engine's contracts and the stores' shared internals; no driver: open the
// *sql.DB with any driver of the three databases. SQLite: see [Open] for the connection settings.
package sqlstore
