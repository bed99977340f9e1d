package schema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
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

// driverDialect tells the dialect from the database/sql driver's Go type,
// without talking to the database. It knows go-sql-driver/mysql, pgx's
// stdlib, lib/pq, glebarez/go-sqlite, modernc.org/sqlite and
// mattn/go-sqlite3; for other drivers (including wrappers that hide the
// real driver) it returns an error wrapping engine.ErrInvalidConfig.
func driverDialect(drv driver.Driver) (Dialect, error) {
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
func typeDialect(pkgPath, name string) (Dialect, error) {
	id := strings.ToLower(pkgPath + "." + name)
	switch {
	case strings.Contains(id, "sqlite"):
		return SQLite, nil
	case strings.Contains(id, "mysql"):
		return MySQL, nil
	case strings.Contains(id, "pgx"), strings.Contains(id, "lib/pq"), strings.Contains(id, "postgres"):
		return Postgres, nil
	}
	return 0, fmt.Errorf("%w: driver %s", errUnknownDialect, id)
}

// Detect tells db's dialect: from the driver's type when it is a known one,
// otherwise by asking the server (version() answers on PostgreSQL and
// MySQL/MariaDB, sqlite_version() on SQLite).
func Detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	d, err := driverDialect(db.Driver())
	if err == nil {
		return d, nil
	}
	var version string
	verr := db.QueryRowContext(ctx, "SELECT version()").Scan(&version)
	if verr == nil {
		if strings.Contains(version, "PostgreSQL") {
			return Postgres, nil
		}
		return MySQL, nil
	}
	serr := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version)
	if serr == nil {
		return SQLite, nil
	}
	return 0, fmt.Errorf("%w (%v; SELECT version(): %v; SELECT sqlite_version(): %v)", errUnknownDialect, err, verr, serr)
}
