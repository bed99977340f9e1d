package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

type pkKind int

const (
	pkAuto pkKind = iota // AUTO_INCREMENT / BIGSERIAL
	pkInt                // BIGINT set by the client
	pkUUID               // BINARY(16) / uuid
)

// server is one database server with the benchmark's own database on it.
type server struct {
	name       string // mariadb, postgres
	dbName     string
	driver     string
	dsn        string  // the benchmark database
	admin      *sql.DB // the server, for CREATE/DROP DATABASE
	db         *sql.DB // the benchmark database, for DDL and statistics
	account    string  // the SQL type of account_id
	index      string  // the column of the secondary index
	version    string
	bufferPool int64
	notes      []string
	restore    func(context.Context) error // undoes server settings the benchmark changed
}

// accountSQL is the SQL type of account_id for -account-type t, or "" for
// a type the benchmark does not know.
func accountSQL(t string) string {
	switch t {
	case "bigint":
		return "BIGINT"
	case "int":
		return "INTEGER"
	}
	return ""
}

func openServer(ctx context.Context, cfg *Config, name, dbName string) (_ *server, err error) {
	s := &server{name: name, dbName: dbName, account: accountSQL(cfg.AccountType), index: cfg.Index}
	switch name {
	case "mariadb":
		s.driver = "mysql"
		mc, err := mysql.ParseDSN(cfg.MySQL)
		if err != nil {
			return nil, fmt.Errorf("IDFORGE_MYSQL_DSN: %w", err)
		}
		admin := mc.Clone()
		admin.DBName = ""
		if s.admin, err = sql.Open("mysql", admin.FormatDSN()); err != nil {
			return nil, err
		}
		mc.DBName, mc.ParseTime = dbName, true
		s.dsn = mc.FormatDSN()
	case "postgres":
		s.driver = "pgx"
		if s.admin, err = sql.Open("pgx", cfg.Postgres); err != nil {
			return nil, err
		}
		u, err := url.Parse(cfg.Postgres)
		if err != nil {
			return nil, fmt.Errorf("IDFORGE_POSTGRES_DSN: %w", err)
		}
		u.Path = "/" + dbName
		s.dsn = u.String()
	default:
		return nil, fmt.Errorf("unknown server %q", name)
	}
	defer func() {
		if err != nil {
			s.admin.Close()
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.admin.PingContext(pctx); err != nil {
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		return nil, err
	}
	if s.db, err = sql.Open(s.driver, s.dsn); err != nil {
		s.dropDatabase(context.Background())
		return nil, err
	}
	if err := s.inspect(ctx); err != nil {
		s.db.Close()
		s.dropDatabase(context.Background())
		return nil, err
	}
	return s, nil
}

// errUnavailable marks a server that could not be reached.
var errUnavailable = errors.New("server unavailable")

func (s *server) inspect(ctx context.Context) error {
	switch s.name {
	case "mariadb":
		if err := s.db.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_buffer_pool_size").Scan(&s.version, &s.bufferPool); err != nil {
			return err
		}
		var enabled int
		err := s.db.QueryRowContext(ctx, "SELECT ENABLED FROM information_schema.INNODB_METRICS WHERE NAME = 'index_page_splits'").Scan(&enabled)
		if err != nil {
			return err
		}
		if enabled == 0 {
			// A counter only; the benchmark turns it off again at the end.
			if _, err := s.db.ExecContext(ctx, "SET GLOBAL innodb_monitor_enable = 'index_page_splits'"); err != nil {
				return err
			}
			s.restore = func(ctx context.Context) error {
				_, err := s.db.ExecContext(ctx, "SET GLOBAL innodb_monitor_disable = 'index_page_splits'")
				return err
			}
		}
		s.notes = append(s.notes,
			"primary_bytes is the clustered index (the rows themselves), secondary_bytes the index on "+s.index+", both from mysql.innodb_index_stats 'size' after ANALYZE TABLE; each secondary entry carries the primary key",
			"buffer_pool_reads (Innodb_buffer_pool_reads) and page_splits (INNODB_METRICS index_page_splits) are server-wide deltas: other clients of the same server count too")
	case "postgres":
		if err := s.db.QueryRowContext(ctx, "SELECT current_setting('server_version'), (SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers')").Scan(&s.version, &s.bufferPool); err != nil {
			return err
		}
		s.notes = append(s.notes,
			"primary_bytes is the primary key index and secondary_bytes the index on "+s.index+" (pg_relation_size); table_bytes is the heap; PostgreSQL's secondary entries point at the heap, not at the key",
			"buffer_pool_reads is heap_blks_read + idx_blks_read of the table (pg_statio_user_*), index_blocks_read / _hit its indexes only; PostgreSQL counts every block it adds to a relation as a read too, so a table that never left shared_buffers shows about its size in blocks; it does not count page splits")
	}
	return nil
}

func (s *server) Version() string   { return s.version }
func (s *server) BufferPool() int64 { return s.bufferPool }
func (s *server) Notes() []string   { return s.notes }

// OpenPool opens a connection pool on the benchmark database for one writer.
func (s *server) OpenPool() (*sql.DB, error) {
	db, err := sql.Open(s.driver, s.dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// Dialector wraps a pool for GORM.
func (s *server) Dialector(db *sql.DB) gorm.Dialector {
	if s.name == "mariadb" {
		return gmysql.New(gmysql.Config{Conn: db})
	}
	return postgres.New(postgres.Config{Conn: db})
}

// CreateTable creates the table afresh.
func (s *server) CreateTable(ctx context.Context, table string, kind pkKind) error {
	for _, q := range s.tableDDL(table, kind) {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// tableDDL is the statements that create the table afresh.
func (s *server) tableDDL(table string, kind pkKind) []string {
	var stmts []string
	switch s.name {
	case "mariadb":
		id := map[pkKind]string{pkAuto: "BIGINT NOT NULL AUTO_INCREMENT", pkInt: "BIGINT NOT NULL", pkUUID: "BINARY(16) NOT NULL"}[kind]
		stmts = []string{
			"DROP TABLE IF EXISTS " + table,
			fmt.Sprintf("CREATE TABLE %s (id %s, account_id %s NOT NULL, created_at DATETIME(6) NOT NULL, payload VARCHAR(255) NOT NULL, "+
				"PRIMARY KEY (id), KEY %s_secondary (%s)) ENGINE=InnoDB", table, id, s.account, table, s.index),
		}
	case "postgres":
		id := map[pkKind]string{pkAuto: "BIGSERIAL", pkInt: "BIGINT", pkUUID: "UUID"}[kind]
		stmts = []string{
			"DROP TABLE IF EXISTS " + table,
			fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY, account_id %s NOT NULL, created_at TIMESTAMPTZ NOT NULL, payload TEXT NOT NULL)", table, id, s.account),
			fmt.Sprintf("CREATE INDEX %s_secondary ON %s (%s)", table, table, s.index),
		}
	}
	return stmts
}

// DropTable drops the table.
func (s *server) DropTable(ctx context.Context, table string) error {
	_, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
	return err
}

// Sizes measures the table and its indexes.
func (s *server) Sizes(ctx context.Context, table string) (Sizes, error) {
	var z Sizes
	switch s.name {
	case "mariadb":
		// ANALYZE recomputes the persistent statistics, including each
		// index's allocated pages ('size'), which information_schema reads.
		rows, err := s.db.QueryContext(ctx, "ANALYZE TABLE "+table)
		if err != nil {
			return z, err
		}
		for rows.Next() {
		}
		rows.Close()
		var page int64
		if err := s.db.QueryRowContext(ctx, "SELECT @@innodb_page_size").Scan(&page); err != nil {
			return z, err
		}
		q := "SELECT index_name, stat_name, stat_value FROM mysql.innodb_index_stats WHERE database_name = ? AND table_name = ? AND stat_name IN ('size', 'n_leaf_pages')"
		rows, err = s.db.QueryContext(ctx, q, s.dbName, table)
		if err != nil {
			return z, err
		}
		defer rows.Close()
		for rows.Next() {
			var index, stat string
			var pages int64
			if err := rows.Scan(&index, &stat, &pages); err != nil {
				return z, err
			}
			switch {
			case index == "PRIMARY" && stat == "size":
				z.Primary = pages * page
			case index == "PRIMARY":
				z.PrimaryLeafPages = pages
			case stat == "size":
				z.Secondary = pages * page
			default:
				z.SecondaryLeafPages = pages
			}
		}
		if err := rows.Err(); err != nil {
			return z, err
		}
		q = "SELECT DATA_LENGTH, INDEX_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
		err = s.db.QueryRowContext(ctx, q, s.dbName, table).Scan(&z.Table, &z.Indexes)
		return z, err
	default:
		q := "SELECT pg_relation_size($1::regclass), pg_relation_size($2::regclass), pg_relation_size($3::regclass), pg_indexes_size($1::regclass)"
		err := s.db.QueryRowContext(ctx, q, table, table+"_pkey", table+"_secondary").Scan(&z.Table, &z.Primary, &z.Secondary, &z.Indexes)
		return z, err
	}
}

// Counters reads the I/O counters; see [Counters].
func (s *server) Counters(ctx context.Context, table string) (Counters, error) {
	var c Counters
	switch s.name {
	case "mariadb":
		var name string
		var reads, splits int64
		if err := s.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_reads'").Scan(&name, &reads); err != nil {
			return c, err
		}
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'index_page_splits'").Scan(&splits); err != nil {
			return c, err
		}
		c.BufferPoolReads, c.PageSplits = &reads, &splits
	default:
		// Backends report their counters when they finish a transaction (at
		// most once a second) and when they exit: the writers' pools are
		// closed by now; give the last reports a moment to land.
		time.Sleep(300 * time.Millisecond)
		if _, err := s.db.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return c, err
		}
		var idxRead, idxHit, heapRead int64
		q := "SELECT coalesce(sum(idx_blks_read), 0), coalesce(sum(idx_blks_hit), 0) FROM pg_statio_user_indexes WHERE relname = $1"
		if err := s.db.QueryRowContext(ctx, q, table).Scan(&idxRead, &idxHit); err != nil {
			return c, err
		}
		q = "SELECT coalesce(sum(heap_blks_read), 0) FROM pg_statio_user_tables WHERE relname = $1"
		if err := s.db.QueryRowContext(ctx, q, table).Scan(&heapRead); err != nil {
			return c, err
		}
		all := idxRead + heapRead
		c.BufferPoolReads, c.IndexReads, c.IndexHits = &all, &idxRead, &idxHit
	}
	return c, nil
}

func (s *server) dropDatabase(ctx context.Context) error {
	q := "DROP DATABASE IF EXISTS " + s.dbName
	if s.name == "postgres" {
		q += " WITH (FORCE)"
	}
	_, err := s.admin.ExecContext(ctx, q)
	return err
}

// Close drops the benchmark database and undoes the settings it changed.
func (s *server) Close(ctx context.Context) error {
	var errs []error
	if s.restore != nil {
		errs = append(errs, s.restore(ctx))
	}
	errs = append(errs, s.db.Close(), s.dropDatabase(ctx), s.admin.Close())
	return errors.Join(errs...)
}
