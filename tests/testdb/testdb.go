// Package testdb gives integration tests their own throw-away databases on
// the real servers: a fresh MariaDB or PostgreSQL database, a SQLite file, or
// a Redis key prefix, each with a unique name and dropped when the test ends.
//
// Addresses come from the environment, with the standard local defaults:
//
//	IDFORGE_MYSQL_DSN     root@tcp(127.0.0.1:3306)/
//	IDFORGE_POSTGRES_DSN  postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
//	IDFORGE_REDIS_ADDR    127.0.0.1:6379
//
// A server that cannot be reached skips the test, or fails it when
// IDFORGE_REQUIRE_SERVERS=1 (as .ci/run sets).
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite" // registers "sqlite"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/redis/go-redis/v9"
)

// DB is one throw-away database.
type DB struct {
	// Name is the kind of server: "sqlite", "mariadb" or "postgres".
	Name string
	// Driver is the database/sql driver name: "sqlite", "mysql" or "pgx".
	Driver string
	// DSN opens the database with Driver.
	DSN string
	// Database is the unique database name (the file path for SQLite).
	Database string
}

// Open opens the database with database/sql and closes it when the test ends.
func (d DB) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(d.Driver, d.DSN)
	if err != nil {
		t.Fatalf("open %s: %v", d.Name, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Required reports whether IDFORGE_REQUIRE_SERVERS=1: missing servers fail tests.
func Required() bool { return os.Getenv("IDFORGE_REQUIRE_SERVERS") == "1" }

func unavailable(t testing.TB, server string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required (IDFORGE_REQUIRE_SERVERS=1) but unavailable: %v", server, err)
	}
	t.Skipf("%s unavailable (set IDFORGE_REQUIRE_SERVERS=1 to fail instead): %v", server, err)
}

// UniqueName returns prefix followed by a random suffix, usable as a
// database name or key prefix.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// MySQLDSN is the server DSN for MariaDB/MySQL, without a database.
func MySQLDSN() string { return env("IDFORGE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/") }

// PostgresDSN is the server DSN for PostgreSQL's maintenance database.
func PostgresDSN() string {
	return env("IDFORGE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}

// RedisAddr is the Redis address.
func RedisAddr() string { return env("IDFORGE_REDIS_ADDR", "127.0.0.1:6379") }

func ctx5s() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// SQLite returns a fresh SQLite database file in the test's temp folder.
func SQLite(t testing.TB) DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idforge.db")
	return DB{Name: "sqlite", Driver: "sqlite", Database: path,
		DSN: "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"}
}

// MariaDB creates a fresh database on the MariaDB/MySQL server and drops it
// when the test ends.
func MariaDB(t testing.TB) DB {
	t.Helper()
	d, err := mariaDB(t)
	if err != nil {
		unavailable(t, "MariaDB", err)
	}
	return d
}

func mariaDB(t testing.TB) (DB, error) {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("IDFORGE_MYSQL_DSN: %v", err)
	}
	cfg.DBName = ""
	admin, err := connect("mysql", cfg.FormatDSN())
	if err != nil {
		return DB{}, err
	}
	name := createDatabase(t, admin, "")
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.MultiStatements = true
	return DB{Name: "mariadb", Driver: "mysql", DSN: cfg.FormatDSN(), Database: name}, nil
}

// connect opens a server connection and checks that it answers.
func connect(driver, dsn string) (*sql.DB, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctx5s()
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// createDatabase creates a uniquely named database through admin, and drops
// it (with dropSuffix appended to the DROP) and closes admin when the test ends.
func createDatabase(t testing.TB, admin *sql.DB, dropSuffix string) string {
	t.Helper()
	name := UniqueName("idf_")
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + dropSuffix); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	return name
}

// Postgres creates a fresh PostgreSQL database and drops it when the test ends.
func Postgres(t testing.TB) DB {
	t.Helper()
	d, err := postgres(t)
	if err != nil {
		unavailable(t, "PostgreSQL", err)
	}
	return d
}

func postgres(t testing.TB) (DB, error) {
	t.Helper()
	admin, err := connect("pgx", PostgresDSN())
	if err != nil {
		return DB{}, err
	}
	name := createDatabase(t, admin, " WITH (FORCE)")
	u, err := url.Parse(PostgresDSN())
	if err != nil {
		t.Fatalf("IDFORGE_POSTGRES_DSN: %v", err)
	}
	u.Path = "/" + name
	return DB{Name: "postgres", Driver: "pgx", DSN: u.String(), Database: name}, nil
}

// All returns one fresh database per kind: SQLite, MariaDB and PostgreSQL.
// A server that cannot be reached is left out with a log line, or fails the
// test when IDFORGE_REQUIRE_SERVERS=1.
func All(t testing.TB) []DB {
	t.Helper()
	out := []DB{SQLite(t)}
	servers := []struct {
		name string
		open func(testing.TB) (DB, error)
	}{{"MariaDB", mariaDB}, {"PostgreSQL", postgres}}
	for _, s := range servers {
		d, err := s.open(t)
		switch {
		case err == nil:
			out = append(out, d)
		case Required():
			t.Fatalf("%s is required (IDFORGE_REQUIRE_SERVERS=1) but unavailable: %v", s.name, err)
		default:
			t.Logf("%s unavailable, left out: %v", s.name, err)
		}
	}
	return out
}

// Redis returns a client and a unique key prefix ending in ':'; every key under
// the prefix is deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	ctx, cancel := ctx5s()
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		unavailable(t, "Redis", err)
		return nil, ""
	}
	prefix := UniqueName("idf:") + ":"
	t.Cleanup(func() {
		ctx, cancel := ctx5s()
		defer cancel()
		_, _ = DeleteRedisKeys(ctx, c, prefix)
		c.Close()
	})
	return c, prefix
}

// DeleteRedisKeys deletes every key starting with prefix (a prefix from
// Redis, free of glob characters) and returns how many it deleted. It never
// touches another key: the Redis may be shared.
func DeleteRedisKeys(ctx context.Context, c *redis.Client, prefix string) (int64, error) {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return 0, err
	}
	return c.Del(ctx, keys...).Result()
}

// Rebind rewrites '?' placeholders for the driver.
func (d DB) Rebind(query string) string {
	if d.Driver != "pgx" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// AutoIncrement reports whether the database made table's column id
// auto-incrementing (AUTOINCREMENT, AUTO_INCREMENT, a nextval default), as
// each dialect shows it; db is a connection to d.
func (d DB) AutoIncrement(t testing.TB, db *sql.DB, table string) bool {
	t.Helper()
	var s sql.NullString
	var err error
	switch d.Name {
	case "sqlite":
		err = db.QueryRow("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&s)
		s.String = strings.ToUpper(s.String)
		return check(t, err) && strings.Contains(s.String, "AUTOINCREMENT")
	case "mariadb":
		err = db.QueryRow("SELECT extra FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'id'", table).Scan(&s)
		return check(t, err) && strings.Contains(strings.ToLower(s.String), "auto_increment")
	default:
		err = db.QueryRow("SELECT column_default FROM information_schema.columns WHERE table_name = $1 AND column_name = 'id'", table).Scan(&s)
		return check(t, err) && strings.Contains(s.String, "nextval")
	}
}

func check(t testing.TB, err error) bool {
	t.Helper()
	if err != nil {
		t.Fatalf("reading the id column's definition: %v", err)
	}
	return true
}
