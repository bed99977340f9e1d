package schema

import (
	"fmt"
	"strings"

	"github.com/idforge/idforge/engine"
)

// errUnknownDialect is wrapped, with engine.ErrInvalidConfig, by every
// error about a dialect name or a database whose dialect could not be told.
var errUnknownDialect = fmt.Errorf("%w: schema: unknown SQL dialect", engine.ErrInvalidConfig)

// Dialect is an SQL dialect the ID tables exist for.
type Dialect int

// The supported dialects. The zero Dialect is invalid.
const (
	// MySQL covers MySQL and MariaDB.
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL.
	Postgres
	// SQLite is SQLite 3.35 or later.
	SQLite
)

// dialects lists every supported dialect.
var dialects = []Dialect{MySQL, Postgres, SQLite}

// String returns the canonical name: "mysql", "postgres" or "sqlite".
func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// valid reports whether d is a supported dialect.
func (d Dialect) valid() bool { return d >= MySQL && d <= SQLite }

// ParseDialect maps a dialect or driver name to its Dialect, ignoring case:
// mysql and mariadb; postgres, postgresql and pgx; sqlite and sqlite3.
// Any other name is an error wrapping engine.ErrInvalidConfig.
func ParseDialect(name string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "mysql", "mariadb":
		return MySQL, nil
	case "postgres", "postgresql", "pgx":
		return Postgres, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	}
	return 0, fmt.Errorf("%w %q (want mysql, mariadb, postgres, postgresql, pgx, sqlite or sqlite3)", errUnknownDialect, name)
}
