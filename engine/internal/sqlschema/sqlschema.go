// Package sqlschema runs the SQL store's DDL (package schema) on a
// database: Ensure creates the tables, Migrate brings tables of an older
// DDL up to date, Detect tells a database's dialect, and Expand writes the
// table names into the store's statements. engine/sqlstore is its user.
package sqlschema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strings"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/schema"
)

// errUnknownDialect is wrapped, with engine.ErrInvalidConfig, by the error
// of a database whose dialect could not be told.
var errUnknownDialect = fmt.Errorf("%w: schema: unknown SQL dialect", engine.ErrInvalidConfig)

// Expand writes the table names with prefix (not empty, checked by
// schema.DDL) into a statement that names them {seg}, {machine} and
// {meta}, so statement text stays one string per dialect whatever the
// prefix.
func Expand(stmt, prefix string) string {
	return strings.NewReplacer("{seg}", prefix+"segment", "{machine}", prefix+"machine", "{meta}", prefix+"meta").Replace(stmt)
}

// statements returns the DDL for d with prefix (as for schema.DDL) split
// into single statements without comments, ready for one Exec each
// (drivers need not allow several statements per Exec).
func statements(d schema.Dialect, prefix string) ([]string, error) {
	ddl, err := schema.DDL(d, prefix)
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.Lines(ddl) {
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
	return out, nil
}

// advisoryLockKey serializes concurrent table creation on PostgreSQL, where
// two CREATE TABLE IF NOT EXISTS racing for the same name can both pass the
// existence check and one then fails on the catalog's unique index.
const advisoryLockKey = 0x1df0_26e0_5c4e_3a01

// Ensure creates the tables for dialect d, named with prefix (as for
// schema.DDL), if they do not exist. It is safe to run from several
// processes at once: MySQL/MariaDB and SQLite serialize CREATE TABLE IF
// NOT EXISTS themselves (SQLite needs a busy timeout), on PostgreSQL the
// statements run in one transaction under an advisory lock.
func Ensure(ctx context.Context, db *sql.DB, d schema.Dialect, prefix string) error {
	stmts, err := statements(d, prefix)
	if err != nil {
		return err
	}
	if d != schema.Postgres {
		for _, stmt := range stmts {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryLockKey)); err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Migrate brings tables (named with prefix, not empty, as for schema.DDL)
// created by an older DDL up to this one: it adds the machine table's
// holder column, taking its definition from the current
// DDL. Several processes may run it at once: one ALTER wins, and the others
// find the column there.
func Migrate(ctx context.Context, db *sql.DB, d schema.Dialect, prefix string) error {
	has := func() bool {
		rows, err := db.QueryContext(ctx, "SELECT holder FROM "+prefix+"machine WHERE 1 = 0")
		if err != nil {
			return false
		}
		return rows.Close() == nil
	}
	if has() {
		return nil
	}
	stmts, err := statements(d, prefix)
	if err != nil {
		return err
	}
	var column string
	for line := range strings.Lines(stmts[1]) { // the machine table's
		if def := strings.TrimSpace(line); strings.HasPrefix(def, "holder ") {
			column = strings.TrimSuffix(def, ",")
		}
	}
	alter := "ALTER TABLE " + prefix + "machine ADD COLUMN " + column
	if _, err := db.ExecContext(ctx, alter); err != nil && !has() {
		return fmt.Errorf("the machine table lacks the holder column and adding it failed; run %q: %w", alter, err)
	}
	return nil
}

// driverDialect tells the dialect from the database/sql driver's Go type,
// without talking to the database. It knows go-sql-driver/mysql, pgx's
// stdlib, lib/pq, glebarez/go-sqlite, modernc.org/sqlite and
// mattn/go-sqlite3; for other drivers (including wrappers that hide the
// real driver) it returns an error wrapping engine.ErrInvalidConfig.
func driverDialect(drv driver.Driver) (schema.Dialect, error) {
	t := reflect.TypeOf(drv)
	if t == nil {
		return 0, fmt.Errorf("%w: no driver", errUnknownDialect)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return typeDialect(t.PkgPath(), t.Name())
}

// typeDialect matches a driver type's package path and name.
func typeDialect(pkgPath, name string) (schema.Dialect, error) {
	id := strings.ToLower(pkgPath + "." + name)
	switch {
	case strings.Contains(id, "sqlite"):
		return schema.SQLite, nil
	case strings.Contains(id, "mysql"):
		return schema.MySQL, nil
	case strings.Contains(id, "pgx"), strings.Contains(id, "lib/pq"), strings.Contains(id, "postgres"):
		return schema.Postgres, nil
	}
	return 0, fmt.Errorf("%w: driver %s", errUnknownDialect, id)
}

// Detect tells db's dialect: from the driver's type when it is a known one,
// otherwise by asking the server (version() answers on PostgreSQL and
// MySQL/MariaDB, sqlite_version() on SQLite).
func Detect(ctx context.Context, db *sql.DB) (schema.Dialect, error) {
	d, err := driverDialect(db.Driver())
	if err == nil {
		return d, nil
	}
	var version string
	verr := db.QueryRowContext(ctx, "SELECT version()").Scan(&version)
	if verr == nil {
		if strings.Contains(version, "PostgreSQL") {
			return schema.Postgres, nil
		}
		return schema.MySQL, nil
	}
	serr := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version)
	if serr == nil {
		return schema.SQLite, nil
	}
	return 0, fmt.Errorf("%w (%v; SELECT version(): %v; SELECT sqlite_version(): %v)", errUnknownDialect, err, verr, serr)
}
