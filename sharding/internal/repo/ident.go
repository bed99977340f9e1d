package repo

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idforge/idforge/engine"
)

// Querier runs a query returning one row: a pool (*sql.DB) or a
// transaction (*sql.Tx, *sqlx.Tx).
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Identity names the database q reaches on dialect's server, so that two
// pools (or a pool and a transaction) reaching one database are told
// apart from two databases, however each connects (TCP or a Unix socket):
// MySQL's host name, port and database (DATABASE(), which is the
// schema); PostgreSQL's port, start time, database and schema (the first
// of search_path that exists: two schemas of one database hold tables of
// their own); SQLite's main file. It is "" when q cannot tell (an SQLite
// database in memory, which no other pool reaches, or another driver).
// Its queries cannot fail in a transaction of a database that answers,
// so asking one leaves it usable.
func Identity(ctx context.Context, q Querier, dialect string) (string, error) {
	var a, b, c, d string
	var err error
	switch dialect {
	case "mysql":
		err = q.QueryRowContext(ctx, "SELECT @@hostname, CAST(@@port AS CHAR), COALESCE(DATABASE(), '')").Scan(&a, &b, &c)
	case "postgres":
		// Not inet_server_addr(), which is empty over a Unix socket: the
		// postmaster's start time tells servers apart.
		err = q.QueryRowContext(ctx, "SELECT current_setting('port'), pg_postmaster_start_time()::text, "+
			"current_database() || COALESCE('.' || current_schema(), '')").Scan(&b, &d, &c)
	case "sqlite":
		err = q.QueryRowContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&c)
		if c == "" {
			return "", err
		}
	default:
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if dialect == "postgres" {
		return fmt.Sprintf("postgres database %q on port %s (server started %s)", c, b, d), nil
	}
	return fmt.Sprintf("%s database %q on %s:%s %s", dialect, c, a, b, d), nil
}

// PoolIdentity is [ORM.Database] of a database/sql pool: the pool and the
// Identity of its database. An error getting the pool wraps
// engine.ErrInvalidConfig.
func PoolIdentity(pool *sql.DB, err error, dialect string) (any, string, error) {
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", engine.ErrInvalidConfig, err)
	}
	if pool == nil {
		return nil, "", fmt.Errorf("%w: no connection pool: open the database before giving it", engine.ErrInvalidConfig)
	}
	ident, err := Identity(context.Background(), pool, dialect)
	return pool, ident, err
}
