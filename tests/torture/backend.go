package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/redis/go-redis/v9"

	idforge "github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// backend is what one run uses on the servers: a fresh database for the rows
// (and for the SQL stores' tables), or for -store redis a redis-server
// process of the run's own (the store under a fresh key prefix), made by the
// driver and dropped or stopped after the run.
type backend struct {
	store string
	// storeAddr is the host:port the fault proxy forwards to.
	storeAddr string
	// storeDSN returns the store's DSN through addr (the proxy); for Redis,
	// addr itself.
	storeDSN    func(addr string) string
	redisPrefix string
	// redis is the run's own Redis server (-store redis).
	redis *testdb.RedisServer
	rows  rowsConfig
	drop  []func(context.Context) error
}

// rowsConfig opens the database the rows go to, directly (not through the proxy).
type rowsConfig struct {
	Driver string // "pgx" or "mysql"
	DSN    string
}

func newBackend(ctx context.Context, store string) (*backend, error) {
	b := &backend{store: store}
	switch store {
	case "postgres", "redis":
		u, err := url.Parse(testdb.PostgresDSN())
		if err != nil {
			return nil, fmt.Errorf("IDFORGE_POSTGRES_DSN: %w", err)
		}
		name, drop, err := createDatabase(ctx, "pgx", testdb.PostgresDSN(), " WITH (FORCE)")
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL at %s: %w", u.Host, err)
		}
		b.drop = append(b.drop, drop)
		u.Path = "/" + name
		q := u.Query()
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
		b.rows = rowsConfig{Driver: "pgx", DSN: u.String()}
		if store == "postgres" {
			b.storeAddr = hostPort(u.Host, "5432")
			b.storeDSN = func(addr string) string {
				v := *u
				v.Host = addr
				return v.String()
			}
		}
	case "mariadb":
		cfg, err := mysql.ParseDSN(testdb.MySQLDSN())
		if err != nil {
			return nil, fmt.Errorf("IDFORGE_MYSQL_DSN: %w", err)
		}
		if cfg.Net != "tcp" {
			return nil, fmt.Errorf("IDFORGE_MYSQL_DSN: the fault proxy needs a tcp address, not %q", cfg.Net)
		}
		cfg.DBName = ""
		name, drop, err := createDatabase(ctx, "mysql", cfg.FormatDSN(), "")
		if err != nil {
			return nil, fmt.Errorf("MariaDB at %s: %w", cfg.Addr, err)
		}
		b.drop = append(b.drop, drop)
		cfg.DBName = name
		cfg.Timeout = 2 * time.Second
		b.rows = rowsConfig{Driver: "mysql", DSN: cfg.FormatDSN()}
		b.storeAddr = hostPort(cfg.Addr, "3306")
		b.storeDSN = func(addr string) string {
			v := cfg.Clone()
			v.Addr = addr
			return v.FormatDSN()
		}
	}
	if store == "redis" {
		// A Redis of the run's own, without persistence, so that the
		// store_reset fault may empty it by restarting it.
		srv, closeSrv, err := startRedisServer(ctx)
		if err != nil {
			b.cleanup(ctx)
			return nil, err
		}
		b.redis = srv
		b.drop = append(b.drop, func(context.Context) error { return closeSrv() })
		b.storeAddr = srv.Addr()
		b.storeDSN = func(addr string) string { return addr }
		b.redisPrefix = testdb.UniqueName("idf:torture:") + ":"
	}
	return b, nil
}

func hostPort(addr, defPort string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, defPort)
}

// createDatabase creates a uniquely named database with the admin DSN and
// returns its name and how to drop it.
func createDatabase(ctx context.Context, driver, adminDSN, dropSuffix string) (string, func(context.Context) error, error) {
	admin, err := sql.Open(driver, adminDSN)
	if err != nil {
		return "", nil, err
	}
	name := testdb.UniqueName("idf_torture_")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.PingContext(pctx); err != nil {
		admin.Close()
		return "", nil, err
	}
	if _, err := admin.ExecContext(pctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func(ctx context.Context) error {
		defer admin.Close()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+dropSuffix); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return name, drop, nil
}

// cleanup drops what newBackend made.
func (b *backend) cleanup(ctx context.Context) error {
	var errs []error
	for _, d := range b.drop {
		errs = append(errs, d(ctx))
	}
	return errors.Join(errs...)
}

// prepare creates the rows tables and the store's tables once, before any
// worker starts, so workers never race to create them.
func (b *backend) prepare(ctx context.Context, rideThrough time.Duration) error {
	db, err := b.rows.open()
	if err != nil {
		return err
	}
	defer db.Close()
	for _, gen := range generators {
		ddl := "CREATE TABLE " + tableOf(gen) + " (id BIGINT NOT NULL PRIMARY KEY, proc INT NOT NULL, batch BIGINT NOT NULL)"
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create table %s: %w", tableOf(gen), err)
		}
	}
	if b.store == "redis" {
		// Declared brand-new, as for SQL: the workers' first start does not
		// wait out a reset grace (the window plus 1 s, past the start-up
		// timeout with a window of a minute); after store_reset they do.
		c := redis.NewClient(&redis.Options{Addr: b.redis.Addr(), MaxRetries: -1})
		defer c.Close()
		if _, err := redisstore.Open(ctx, c, redisstore.Settings{Prefix: b.redisPrefix, AllowVolatile: true, Init: true, RideThrough: storeWindow(rideThrough)}); err != nil {
			return fmt.Errorf("initialise the store: %w", err)
		}
		return nil
	}
	st, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, Init: true, RideThrough: storeWindow(rideThrough)})
	if err != nil {
		return fmt.Errorf("create the store's tables: %w", err)
	}
	return st.Close()
}

// wipe empties the store, as a careless operator or a restore of an empty
// backup would, and returns how many rows or keys it deleted: for Redis
// every key of the run's own server (FLUSHALL), for the SQL stores every
// row of idforge's tables. The epoch goes first: a process that finds it
// gone creates a new one and writes nothing under it until the reset grace
// has passed, long after the other tables are empty.
func (b *backend) wipe(ctx context.Context) (int64, error) {
	if b.store == "redis" {
		c := redis.NewClient(&redis.Options{Addr: b.redis.Addr(), MaxRetries: -1})
		defer c.Close()
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return 0, fmt.Errorf("DBSIZE: %w", err)
		}
		return n, c.FlushAll(ctx).Err()
	}
	db, err := b.rows.open() // the store's tables are in the rows' database
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	// The default names, as the workers use.
	for _, table := range []string{"idforge_meta", "idforge_machine", "idforge_segment"} {
		res, err := db.ExecContext(ctx, "DELETE FROM "+table)
		if err != nil {
			return n, fmt.Errorf("empty %s: %w", table, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

func (r rowsConfig) open() (*sql.DB, error) {
	db, err := sql.Open(r.Driver, r.DSN)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", r.Driver, err)
	}
	return db, nil
}

// openStore opens the shared store for a worker, through the proxy, with the
// worker's clock judging machine-ID expiry (the host clock a real process
// would use). The returned func closes it.
func openStore(ctx context.Context, wc workerConfig, clk clock.Clock) (idforge.Store, func(), error) {
	if wc.Store == "redis" {
		c := redis.NewClient(&redis.Options{
			Addr: wc.StoreDSN, PoolSize: 4, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		// AllowVolatile: the suite runs on whatever Redis it is given and
		// checks for duplicates itself; the epoch and grace still apply.
		st, err := redisstore.Open(ctx, c, redisstore.Settings{Prefix: wc.RedisPrefix, Clock: clk, AllowVolatile: true, RideThrough: storeWindow(wc.RideThrough)})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return st, func() { c.Close() }, nil
	}
	db, err := sql.Open(map[string]string{"postgres": "pgx", "mariadb": "mysql"}[wc.Store], wc.StoreDSN)
	if err != nil {
		return nil, nil, err
	}
	// A chain's prefetch, the lease's heartbeat and a re-acquisition may
	// overlap; more would only add connections to a small server.
	db.SetMaxOpenConns(3)
	st, err := sqlstore.Open(ctx, db, sqlstore.Settings{Clock: clk, RideThrough: storeWindow(wc.RideThrough)})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return st, func() { st.Close(); db.Close() }, nil
}

// rowsDB inserts the workers' rows.
type rowsDB struct {
	db    *sql.DB
	mysql bool
}

// insert inserts ids as rows of (proc, batch) in one multi-row INSERT, one
// transaction. With ignoreDup, rows whose ID is already there are skipped
// instead of failing the statement.
func (r rowsDB) insert(ctx context.Context, table string, ids []int64, proc, batch int64, ignoreDup bool) error {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (id, proc, batch) VALUES ")
	tail := "," + strconv.FormatInt(proc, 10) + "," + strconv.FormatInt(batch, 10) + ")"
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteString(tail)
	}
	if ignoreDup {
		if r.mysql {
			b.WriteString(" ON DUPLICATE KEY UPDATE id = id")
		} else {
			b.WriteString(" ON CONFLICT (id) DO NOTHING")
		}
	}
	_, err := r.db.ExecContext(ctx, b.String())
	return err
}

// conflict is a row another batch inserted with an ID of ours.
type conflict struct{ id, proc, batch int64 }

// conflicts lists the rows with one of ids that another batch (not (proc, batch)) inserted.
func (r rowsDB) conflicts(ctx context.Context, table string, ids []int64, proc, batch int64) ([]conflict, error) {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	q := fmt.Sprintf("SELECT id, proc, batch FROM %s WHERE id IN (%s) AND NOT (proc = %d AND batch = %d)",
		table, strings.Join(list, ","), proc, batch)
	rows, err := r.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []conflict
	for rows.Next() {
		var c conflict
		if err := rows.Scan(&c.id, &c.proc, &c.batch); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// isDuplicateKey reports a primary-key violation.
func isDuplicateKey(err error) bool {
	var pg *pgconn.PgError
	var my *mysql.MySQLError
	return errors.As(err, &pg) && pg.Code == "23505" || errors.As(err, &my) && my.Number == 1062
}

// storeWindow is the stores' RideThrough for -ride-through d: 0 turns the
// reservation off (negative RideThrough), the control of kill_clock_back.
func storeWindow(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
