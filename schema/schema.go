package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strings"

	"github.com/idforge/idforge/engine"
)

// The DDL of each dialect, commented, with the default table prefix.
//
//go:embed ddl/mysql.sql ddl/postgres.sql ddl/sqlite.sql
var ddlFiles embed.FS

// defaultTablePrefix starts the table names unless a prefix is given:
// idforge_segment, idforge_machine, idforge_meta.
const defaultTablePrefix = "idforge_"

// maxPrefix keeps the longest name (prefix + "machine_instance") within
// PostgreSQL's 63-byte identifiers.
const maxPrefix = 40

// tables names the store's tables: a prefix followed by "segment",
// "machine" and "meta". The zero value has the default prefix.
type tables struct{ prefix string }

// newTables returns the tables named with prefix ("" for
// "idforge_"): a plain identifier (letters, digits and '_', not
// starting with a digit) of at most 40 bytes, since it is written into SQL
// unquoted; anything else is an error wrapping engine.ErrInvalidConfig.
func newTables(prefix string) (tables, error) {
	if prefix == "" {
		return tables{defaultTablePrefix}, nil
	}
	if len(prefix) > maxPrefix {
		return tables{}, fmt.Errorf("%w: schema: table prefix %q: want at most %d bytes", engine.ErrInvalidConfig, prefix, maxPrefix)
	}
	for i, r := range prefix {
		ok := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9'
		if !ok {
			return tables{}, fmt.Errorf("%w: schema: table prefix %q: only letters, digits and '_', not starting with a digit",
				engine.ErrInvalidConfig, prefix)
		}
	}
	return tables{prefix}, nil
}

// prefixOr returns the prefix of the table names, the default for none.
func (t tables) prefixOr() string { return t.orDefault().prefix }

// expand writes the table names into a statement; see [Expand].
func (t tables) expand(stmt string) string {
	p := t.prefixOr()
	return strings.NewReplacer("{seg}", p+"segment", "{machine}", p+"machine", "{meta}", p+"meta").Replace(stmt)
}

// Expand writes the table names with tablePrefix ("" for "idforge_") into
// a statement that names them {seg}, {machine} and {meta}, so statement
// text stays one string per dialect whatever the prefix. A bad prefix is an
// error as for [DDL].
func Expand(stmt, tablePrefix string) (string, error) {
	t, err := newTables(tablePrefix)
	if err != nil {
		return "", err
	}
	return t.expand(stmt), nil
}

func (t tables) orDefault() tables {
	if t.prefix == "" {
		return tables{defaultTablePrefix}
	}
	return t
}

// DDL returns the commented CREATE TABLE statements of the store's tables
// for d, with tablePrefix ("" for "idforge_") starting their
// names; `idforge schema` prints it. A prefix must be a plain identifier
// (letters, digits and '_', not starting with a digit) of at most 40 bytes,
// since it is written into SQL unquoted; a bad prefix or dialect is an error
// wrapping engine.ErrInvalidConfig.
func DDL(d Dialect, tablePrefix string) (string, error) {
	t, err := newTables(tablePrefix)
	if err != nil {
		return "", err
	}
	return t.ddl(d)
}

func (t tables) ddl(d Dialect) (string, error) {
	if !d.valid() {
		return "", fmt.Errorf("%w %v", errUnknownDialect, d)
	}
	b, err := ddlFiles.ReadFile("ddl/" + d.String() + ".sql")
	if err != nil {
		return "", fmt.Errorf("schema: %w", err) // every valid dialect is embedded; TestDDL covers them
	}
	return strings.ReplaceAll(string(b), defaultTablePrefix, t.prefixOr()), nil
}

// statements returns the DDL for d with tablePrefix (as for [DDL]) split
// into single statements without comments, ready for one Exec each
// (drivers need not allow several statements per Exec).
func statements(d Dialect, tablePrefix string) ([]string, error) {
	t, err := newTables(tablePrefix)
	if err != nil {
		return nil, err
	}
	return t.statements(d)
}

func (t tables) statements(d Dialect) ([]string, error) {
	ddl, err := t.ddl(d)
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

// Ensure creates the tables for dialect d, named with tablePrefix (as for
// [DDL]), if they do not exist. It is safe
// to run from several processes at once: MySQL/MariaDB and SQLite serialize
// CREATE TABLE IF NOT EXISTS themselves (SQLite needs a busy timeout), on
// PostgreSQL the statements run in one transaction under an advisory lock.
func Ensure(ctx context.Context, db *sql.DB, d Dialect, tablePrefix string) error {
	stmts, err := statements(d, tablePrefix)
	if err != nil {
		return err
	}
	if d != Postgres {
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

// Migrate brings tables (named with tablePrefix, as for [DDL]) created by
// an older DDL up to this one: it adds the
// machine table's holder column, taking its definition from the current
// DDL. Several processes may run it at once: one ALTER wins, and the others
// find the column there.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, tablePrefix string) error {
	t, err := newTables(tablePrefix)
	if err != nil {
		return err
	}
	has := func() bool {
		rows, err := db.QueryContext(ctx, "SELECT holder FROM "+t.prefixOr()+"machine"+" WHERE 1 = 0")
		if err != nil {
			return false
		}
		return rows.Close() == nil
	}
	if has() {
		return nil
	}
	stmts, err := t.statements(d)
	if err != nil {
		return err
	}
	var column string
	for line := range strings.Lines(stmts[1]) { // the machine table's
		if def := strings.TrimSpace(line); strings.HasPrefix(def, "holder ") {
			column = strings.TrimSuffix(def, ",")
		}
	}
	alter := "ALTER TABLE " + t.prefixOr() + "machine" + " ADD COLUMN " + column
	if _, err := db.ExecContext(ctx, alter); err != nil && !has() {
		return fmt.Errorf("the machine table lacks the holder column and adding it failed; run %q: %w", alter, err)
	}
	return nil
}
