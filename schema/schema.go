// Package schema holds the DDL of idforge's ID tables for MySQL/MariaDB,
// PostgreSQL and SQLite, embedded from .sql files, and creates them.
//
// Two tables serve the stores in engine/sqlstore:
//
//   - idforge_segment: one row per segment sequence (name, last_max_id,
//     step, created_at, last_fetch_time);
//   - idforge_machine: one row per machine ID of a namespace (namespace,
//     machine_id, instance_id, stable, last_timestamp, prev_timestamp,
//     distribute_time, revert_time, version), whose primary key and unique
//     key make it impossible to hand one machine ID to two instances or two
//     machine IDs to one instance.
//
// Print the DDL with [DDL] (the CLI's `idforge schema -dialect …` does), or
// let [Ensure] create the tables when a service starts. [NewTables] gives
// the tables another prefix.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
)

//go:embed mysql.sql postgres.sql sqlite.sql
var files embed.FS

// defaultPrefix is the prefix the .sql files are written with.
const defaultPrefix = "idforge_"

// maxPrefix keeps the longest name (prefix + "machine_instance") within
// PostgreSQL's 63-byte identifiers.
const maxPrefix = 40

// ErrInvalidPrefix is wrapped by [NewTables] for a prefix that is not a
// plain SQL identifier.
var ErrInvalidPrefix = errors.New("schema: invalid table prefix")

// Tables names the ID tables: a prefix followed by "segment" and "machine".
// The zero value is the default prefix, "idforge_".
type Tables struct {
	prefix string
}

// NewTables returns the tables named prefix+"segment" and prefix+"machine".
// The prefix must be a plain identifier (letters, digits and underscores,
// not starting with a digit) of at most 40 bytes, since it is written into
// SQL unquoted.
func NewTables(prefix string) (Tables, error) {
	if prefix == "" || len(prefix) > maxPrefix {
		return Tables{}, fmt.Errorf("%w %q: want 1 to %d bytes", ErrInvalidPrefix, prefix, maxPrefix)
	}
	for i, r := range prefix {
		ok := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9'
		if !ok {
			return Tables{}, fmt.Errorf("%w %q: only letters, digits and '_', not starting with a digit", ErrInvalidPrefix, prefix)
		}
	}
	return Tables{prefix: prefix}, nil
}

// Prefix returns the tables' prefix.
func (t Tables) Prefix() string {
	if t.prefix == "" {
		return defaultPrefix
	}
	return t.prefix
}

// Segment returns the segment table's name.
func (t Tables) Segment() string { return t.Prefix() + "segment" }

// Machine returns the machine table's name.
func (t Tables) Machine() string { return t.Prefix() + "machine" }

// DDL returns the commented CREATE TABLE statements for d, or "" for an
// invalid dialect (see [ParseDialect]).
func (t Tables) DDL(d Dialect) string {
	if !d.valid() {
		return ""
	}
	b, err := files.ReadFile(d.String() + ".sql")
	if err != nil {
		// Every valid dialect has its file embedded; TestDDL covers them.
		return ""
	}
	return strings.ReplaceAll(string(b), defaultPrefix, t.Prefix())
}

// Statements returns the DDL for d split into single statements without
// comments, ready for one Exec each (drivers need not allow several
// statements per Exec).
func (t Tables) Statements(d Dialect) []string {
	var lines []string
	for line := range strings.Lines(t.DDL(d)) {
		if code, _, _ := strings.Cut(line, "--"); strings.TrimSpace(code) != "" {
			lines = append(lines, strings.TrimRight(code, " \t\n"))
		}
	}
	var out []string
	for stmt := range strings.SplitSeq(strings.Join(lines, "\n"), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}

// advisoryLockKey serializes concurrent Ensure calls on PostgreSQL, where
// two CREATE TABLE IF NOT EXISTS racing for the same name can both pass the
// existence check and one then fails on the catalog's unique index.
const advisoryLockKey = 0x1df0_26e0_5c4e_3a01

// Ensure creates the tables on db for dialect d if they do not exist. It is
// safe to run from several processes at once: MySQL/MariaDB and SQLite
// serialize CREATE TABLE IF NOT EXISTS themselves (SQLite needs a busy
// timeout on the connection), on PostgreSQL the statements run in one
// transaction under an advisory lock.
func (t Tables) Ensure(ctx context.Context, db *sql.DB, d Dialect) error {
	if !d.valid() {
		return fmt.Errorf("%w: %v", ErrUnknownDialect, d)
	}
	if d != Postgres {
		for _, stmt := range t.Statements(d) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("schema: creating the ID tables on %s: %w", d, err)
			}
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("schema: creating the ID tables on %s: %w", d, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryLockKey)); err != nil {
		return fmt.Errorf("schema: locking for DDL on %s: %w", d, err)
	}
	for _, stmt := range t.Statements(d) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: creating the ID tables on %s: %w", d, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("schema: creating the ID tables on %s: %w", d, err)
	}
	return nil
}

// DDL returns the commented CREATE TABLE statements of the default tables
// for d, or "" for an invalid dialect.
func DDL(d Dialect) string { return Tables{}.DDL(d) }

// Ensure detects db's dialect and creates the default tables if they do
// not exist; see [Tables.Ensure].
func Ensure(ctx context.Context, db *sql.DB) error {
	d, err := Detect(ctx, db)
	if err != nil {
		return err
	}
	return Tables{}.Ensure(ctx, db, d)
}
