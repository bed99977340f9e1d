package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	gormmysql "gorm.io/driver/mysql"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// restoreWork configures a worker of TestRestoreFromDump: it writes rows
// of restoreRow through GORM (gen "tagged": the row's chain ID, reported
// once the row is stored) and, after each row, draws one ID from the chain
// Bare, which no Floor knows (gen Bare).
type restoreWork struct {
	Bare string
	Step int64 // the chains' segment size
	// RowsDriver and RowsDSN open the database of the rows' table.
	RowsDriver, RowsDSN string
}

// restoreRow is a row of TestRestoreFromDump's table. Seq draws from the
// chain restore_rows, whose Floor the GORM plugin derives from the column;
// it is no key, so an ID drawn twice is stored twice and counted.
type restoreRow struct {
	ID   int64  `gorm:"primaryKey;autoIncrement"`
	Seq  int64  `gorm:"index" idgen:"chain,name=restore_rows"`
	Proc string `gorm:"size:32"`
}

// runRestoreWorker is the worker of TestRestoreFromDump: a registry on the
// SQL store, the GORM plugin on the same database, rows and bare IDs until
// "quit".
func runRestoreWorker(cfg workerConfig) int {
	ctx, quit := context.WithCancel(context.Background())
	defer quit()
	go func() {
		defer quit()
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "quit" {
				return
			}
		}
	}()
	o := &out{w: os.Stdout}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", cfg.Name)
	var st idforge.Store
	for {
		var err error
		if cfg.Redis != "" {
			c := redis.NewClient(&redis.Options{Addr: cfg.Redis, MaxRetries: -1, PoolSize: 4})
			defer c.Close()
			st, err = redisstore.Open(ctx, c, redisstore.Settings{Prefix: cfg.Prefix, AllowVolatile: true, Logger: log})
		} else {
			db, derr := sql.Open(cfg.SQLDriver, cfg.SQLDSN)
			if derr != nil {
				fmt.Fprintf(os.Stderr, "worker: %v\n", derr)
				return 2
			}
			defer db.Close()
			st, err = sqlstore.Open(ctx, db)
		}
		if err == nil {
			break
		}
		log.Warn("opening the store, retrying", "err", err)
		if clock.System.Sleep(ctx, 100*time.Millisecond) != nil {
			return 1
		}
	}
	var reg *idforge.Registry
	var err error
	for {
		reg, err = idforge.New(ctx, idforge.Settings{Store: st, Namespace: cfg.Namespace, Logger: log,
			Chain: segment.Settings{Step: cfg.Restore.Step, MaxWait: 500 * time.Millisecond}})
		if err == nil {
			break
		}
		o.printf("err new %s %s", refusalClass(err), oneLine(err))
		if clock.System.Sleep(ctx, 20*time.Millisecond) != nil {
			return 0
		}
	}
	defer reg.Close()
	gdb, err := gorm.Open(dialector(cfg.Restore.RowsDriver, cfg.Restore.RowsDSN), &gorm.Config{Logger: logger.Discard})
	if err == nil {
		err = gdb.Use(idplugin.New(idplugin.Settings{Registry: reg}))
	}
	if err == nil {
		err = idplugin.Prepare(gdb, &restoreRow{})
	}
	if err != nil {
		o.printf("err setup other %s", oneLine(err))
		return 1
	}
	o.printf("ready %d 0 0", reg.Stats().MachineID)
	// The class of each generator's refusals since its last ID: a streak
	// is reported once per class.
	failing := map[string]string{}
	refused := func(gen string, err error) {
		if class := refusalClass(err); failing[gen] != class {
			o.printf("err %s %s %s", gen, class, oneLine(err))
			failing[gen] = class
		}
		_ = clock.System.Sleep(ctx, 5*time.Millisecond)
	}
	for ctx.Err() == nil {
		row := restoreRow{Proc: cfg.Name}
		if err := gdb.WithContext(ctx).Create(&row).Error; err != nil {
			if ctx.Err() != nil {
				break
			}
			refused("tagged", err)
		} else {
			failing["tagged"] = ""
			o.printf("run tagged %d 1", row.Seq)
		}
		id, err := reg.NextID(ctx, "chain", cfg.Restore.Bare)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			refused(cfg.Restore.Bare, err)
			continue
		}
		failing[cfg.Restore.Bare] = ""
		o.printf("run %s %d 1", cfg.Restore.Bare, id)
	}
	o.printf("stats 0 0 -")
	return 0
}

// TestRestoreFromDump restores a dump of the store (mysqldump on MariaDB,
// pg_dump on PostgreSQL, an RDB file on Redis, the rows then in MariaDB)
// under worker processes that write chain
// IDs into a tagged table (the GORM plugin derives the chain's Floor from
// it) and draw a chain no Floor knows. Each arm, on a database of its own:
// two workers on a store set up with `idforge store init`; a dump once 200
// rows are written; the workers go on until both chains' counters are ten
// ranges past the dump, then stop; the dump is restored; two new workers
// start and run until each wrote 100 rows and drew 50 bare IDs or was
// refused them. Arms:
//
//   - procedure: the documented one, the store declared restored
//     (`idforge store restored`, machine.Admin.Restored). The bare chain is
//     refused with engine.ErrNoFloor; no ID is stored twice.
//   - epoch-deleted: idforge_meta emptied (the Redis epoch key deleted)
//     instead, the procedure these docs gave before. The store marks its
//     counters untrusted at the next Open: the same outcome.
//   - control: the dump restored with its epoch and nothing else. Nothing
//     can tell it from the store that was dumped: the new workers draw the
//     bare chain from the dump's counter, and the IDs drawn twice are
//     counted, or the test could not fail. The tagged chain still has no
//     ID stored twice: its Floor reads the rows.
//   - live (MariaDB, Redis): one worker (its own bare chain) stays up while
//     a data-only dump (REPLACE INTO), or the Redis restarted from the old
//     RDB file, puts the counters back under it. Its
//     next fetch finds its counter below what it got: it sees a reset, the
//     store marks every counter untrusted, it goes on above what it held,
//     and the new worker is refused the bare chain the stopped worker drew.
func TestRestoreFromDump(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes and the databases' dump tools; skipped with -short")
	}
	for _, kind := range []struct {
		name  string
		side  func(t *testing.T) (restoreSide, testdb.DB)
		tools []string
		arms  []string
	}{
		{"mariadb", func(t *testing.T) (restoreSide, testdb.DB) { d := testdb.MariaDB(t); return sqlSide(t, d), d },
			[]string{"mysqldump", "mysql"}, []string{"procedure", "epoch-deleted", "control", "live"}},
		{"postgres", func(t *testing.T) (restoreSide, testdb.DB) { d := testdb.Postgres(t); return sqlSide(t, d), d },
			[]string{"pg_dump", "psql"}, []string{"procedure", "epoch-deleted", "control"}},
		{"redis", func(t *testing.T) (restoreSide, testdb.DB) { return redisSide(t), testdb.MariaDB(t) },
			[]string{"redis-server"}, []string{"procedure", "epoch-deleted", "control", "live"}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			for _, tool := range kind.tools {
				if _, err := exec.LookPath(tool); err != nil {
					if testdb.Required() {
						t.Fatalf("%s is required (IDFORGE_REQUIRE_SERVERS=1): %v", tool, err)
					}
					t.Skipf("no %s: %v", tool, err)
				}
			}
			for _, arm := range kind.arms {
				t.Run(arm, func(t *testing.T) {
					side, rowsDB := kind.side(t)
					restoreFromDump(t, side, rowsDB, arm)
				})
			}
		})
	}
}

// restoreSide is the store a restore arm runs on.
type restoreSide struct {
	cfg     workerConfig            // the store's part of a worker's configuration
	counter func(name string) int64 // a sequence's counter as the store holds it
	// backup dumps the store (with dataOnly, in a form that loads under
	// running processes) and returns what restores the dump.
	backup    func(t *testing.T, dataOnly bool) (restore func(t *testing.T))
	declare   func(t *testing.T) // idforge store restored
	dropEpoch func(t *testing.T) // idforge_meta emptied, the Redis epoch key deleted
}

// sqlSide is the SQL store on d, set up as `idforge store init` does, dumped
// with mysqldump or pg_dump.
func sqlSide(t *testing.T, d testdb.DB) restoreSide {
	ctx := t.Context()
	admin := d.Open(t)
	st, err := sqlstore.Open(ctx, admin, sqlstore.Settings{CreateTables: true, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return restoreSide{
		cfg: workerConfig{SQLDriver: d.Driver, SQLDSN: d.DSN},
		counter: func(name string) int64 {
			var n sql.NullInt64
			if err := admin.QueryRowContext(ctx, d.Rebind("SELECT MAX(last_max_id) FROM idforge_segment WHERE name = ?"), name).Scan(&n); err != nil {
				t.Fatalf("reading the counter of %s: %v", name, err)
			}
			return n.Int64
		},
		backup: func(t *testing.T, dataOnly bool) func(t *testing.T) {
			dump := dumpStore(t, d, dataOnly)
			return func(t *testing.T) { loadDump(t, d, dump) }
		},
		declare: func(t *testing.T) {
			ad, err := sqlstore.OpenAdmin(ctx, admin)
			if err != nil {
				t.Fatal(err)
			}
			defer ad.Close()
			if err := ad.Restored(ctx); err != nil {
				t.Fatalf("declaring the store restored: %v", err)
			}
		},
		dropEpoch: func(t *testing.T) {
			if _, err := admin.ExecContext(ctx, "DELETE FROM idforge_meta"); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// redisSide is a Redis of the test's own (RDB only, saved on demand), set
// up as `idforge store init` does. A backup is its dump.rdb after SAVE; a
// restore kills the server, puts the file back and starts it, which loads
// it, under running processes or not.
func redisSide(t *testing.T) restoreSide {
	ctx := t.Context()
	srv := testdb.StartRedisServer(t, testdb.RedisVolatile()...)
	client := srv.Client(t)
	const prefix = "{restore}:"
	open := func(init bool) *redisstore.Store {
		st, err := redisstore.Open(ctx, client, redisstore.Settings{Prefix: prefix, AllowVolatile: true, Init: init, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	open(true) // idforge store init
	rdb := filepath.Join(srv.Dir(), "dump.rdb")
	return restoreSide{
		cfg: workerConfig{Redis: srv.Addr(), Prefix: prefix},
		counter: func(name string) int64 {
			n, err := client.Get(ctx, prefix+"segment:"+name).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("reading the counter of %s: %v", name, err)
			}
			return n
		},
		backup: func(t *testing.T, _ bool) func(t *testing.T) {
			if err := client.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			saved, err := os.ReadFile(rdb)
			if err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				srv.Kill()
				if err := os.WriteFile(rdb, saved, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := srv.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
		},
		declare: func(t *testing.T) {
			ad, err := redisstore.OpenAdmin(ctx, client, redisstore.Settings{Prefix: prefix, AllowVolatile: true, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := ad.Restored(ctx); err != nil {
				t.Fatalf("declaring the store restored: %v", err)
			}
		},
		dropEpoch: func(t *testing.T) {
			// redisstore's key layout: the epoch beside the counters.
			if err := client.Del(ctx, prefix+"epoch").Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func restoreFromDump(t *testing.T, side restoreSide, d testdb.DB, arm string) {
	ctx := t.Context()
	admin := d.Open(t)
	gdb, err := gorm.Open(dialector(d.Driver, d.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.AutoMigrate(&restoreRow{}); err != nil {
		t.Fatal(err)
	}
	const step = 20
	worker := func(name, bare string) *workerProc {
		cfg := side.cfg
		cfg.Name, cfg.Namespace = name, "restore"
		cfg.Restore = &restoreWork{Bare: bare, Step: step, RowsDriver: d.Driver, RowsDSN: d.DSN}
		return startWorker(t, cfg)
	}
	query := func(q string, args ...any) int64 {
		t.Helper()
		var n sql.NullInt64
		if err := admin.QueryRowContext(ctx, d.Rebind(q), args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n.Int64
	}
	counter := side.counter
	rows := func() int64 { return query("SELECT COUNT(*) FROM restore_rows") }
	issued := func(p *workerProc, gen string) int64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.issued[gen]
	}
	refusals := func(p *workerProc, gen, class string) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := 0
		for _, e := range p.errs {
			if strings.HasPrefix(e, gen+" "+class+" ") {
				n++
			}
		}
		return n
	}

	live := arm == "live"
	// a2 is the live worker in the live arm, with a bare chain of its own.
	a1, a2, liveBare := worker("a1", "bare"), (*workerProc)(nil), "bare"
	if live {
		liveBare = "bare_live"
		a2 = worker("live", liveBare)
	} else {
		a2 = worker("a2", "bare")
	}
	eventually(t, "200 rows written and bare IDs drawn", func() bool {
		return rows() >= 200 && issued(a1, "bare") >= 50 && issued(a2, liveBare) >= 50
	})
	restore := side.backup(t, live)
	// The counters now are at least the dumped ones: go on ten ranges past.
	names := slices.Compact([]string{"restore_rows", "bare", liveBare})
	past := map[string]int64{}
	for _, n := range names {
		past[n] = counter(n) + 10*step
	}
	eventually(t, "every counter ten ranges past the dump", func() bool {
		for _, n := range names {
			if counter(n) < past[n] {
				return false
			}
		}
		return true
	})
	a1.quit(t)
	before := []*workerProc{a1}
	if !live {
		a2.quit(t)
		before = append(before, a2)
	}
	restore(t)

	switch arm {
	case "procedure":
		side.declare(t)
	case "epoch-deleted":
		side.dropEpoch(t)
	case "live":
		eventually(t, "the live worker seeing the store go back", func() bool {
			return refusals(a2, "tagged", "store_reset")+refusals(a2, liveBare, "store_reset") > 0
		})
	}

	after := []*workerProc{worker("b1", "bare")}
	if !live {
		after = append(after, worker("b2", "bare"))
	}
	since := time.Now()
	var liveBefore int64
	if live {
		liveBefore = issued(a2, liveBare)
	}
	for _, p := range after {
		eventually(t, p.name+" writing 100 rows and drawing or refused 50 bare IDs", func() bool {
			return issued(p, "tagged") >= 100 && (issued(p, "bare") >= 50 || refusals(p, "bare", "no_floor") > 0)
		})
	}
	var liveAfter int64
	if live {
		a2.waitIssuing(t, since, liveBare)
		liveAfter = issued(a2, liveBare) - liveBefore
		a2.quit(t)
		after = append(after, a2)
	}
	for _, p := range after {
		p.quit(t)
	}
	all := append(before, after...)

	stored := query("SELECT COUNT(*) - COUNT(DISTINCT seq) FROM restore_rows")
	bare := duplicates("bare", all...)
	var bareAfter int64
	for _, p := range after {
		bareAfter += issued(p, "bare")
	}
	t.Logf("%d rows, %d chain IDs stored twice; bare: %d IDs drawn, %d after the restore, %d drawn twice %q",
		rows(), stored, bare.issued, bareAfter, bare.duplicates, bare.samples)
	if stored != 0 {
		t.Errorf("%d chain IDs of the tagged table are stored twice: its Floor did not keep the new workers above the rows", stored)
	}
	switch arm {
	case "control":
		if bare.duplicates == 0 {
			t.Errorf("control: no bare ID drawn twice after a restore with its epoch and nothing else: the test could not fail")
		}
	default:
		if bare.duplicates != 0 {
			t.Errorf("%d bare IDs drawn twice", bare.duplicates)
		}
		for _, p := range after {
			if p == a2 && live {
				continue
			}
			if n := issued(p, "bare"); n != 0 || refusals(p, "bare", "no_floor") == 0 {
				t.Errorf("%s drew %d IDs of the bare chain, whose counter the restore put back, and was refused %d times; want none drawn, refused with no_floor",
					p.name, n, refusals(p, "bare", "no_floor"))
			}
		}
	}
	if live {
		rep := duplicates(liveBare, a2)
		t.Logf("live worker: %d IDs of its own chain, %d of them after the new worker started, %d drawn twice", rep.issued, liveAfter, rep.duplicates)
		if rep.duplicates != 0 {
			t.Errorf("the live worker drew %d IDs of its own chain twice across the restore", rep.duplicates)
		}
	}
}

// dumpStore dumps the store's three tables of d with mysqldump or pg_dump:
// whole tables, or (MariaDB) with dataOnly REPLACE INTO statements only,
// which put the rows back in place under running processes.
func dumpStore(t *testing.T, d testdb.DB, dataOnly bool) []byte {
	t.Helper()
	tables := []string{"idforge_segment", "idforge_machine", "idforge_meta"}
	var cmd *exec.Cmd
	if d.Driver == "pgx" {
		args := []string{"--dbname=" + d.DSN, "--no-owner", "--clean", "--if-exists"}
		for _, table := range tables {
			args = append(args, "-t", table)
		}
		cmd = exec.CommandContext(t.Context(), "pg_dump", args...)
	} else {
		args := append(mysqlArgs(t, d), "--single-transaction")
		if dataOnly {
			args = append(args, "--no-create-info", "--replace")
		}
		cmd = exec.CommandContext(t.Context(), "mysqldump", append(append(args, d.Database), tables...)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dump, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd.Path, err, stderr.String())
	}
	return dump
}

// loadDump runs a dump into d with the mysql or psql client.
func loadDump(t *testing.T, d testdb.DB, dump []byte) {
	t.Helper()
	var cmd *exec.Cmd
	if d.Driver == "pgx" {
		cmd = exec.CommandContext(t.Context(), "psql", "--dbname="+d.DSN, "-v", "ON_ERROR_STOP=1", "-q")
	} else {
		cmd = exec.CommandContext(t.Context(), "mysql", append(mysqlArgs(t, d), d.Database)...)
	}
	cmd.Stdin = bytes.NewReader(dump)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s < dump: %v: %s", cmd.Path, err, out)
	}
}

// dialector is GORM's dialector for a database/sql driver name and DSN.
func dialector(driver, dsn string) gorm.Dialector {
	if driver == "pgx" {
		return gormpostgres.Open(dsn)
	}
	return gormmysql.Open(dsn)
}

// mysqlArgs are the client tools' connection flags for d's server.
func mysqlArgs(t *testing.T, d testdb.DB) []string {
	t.Helper()
	cfg, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	host, port, ok := strings.Cut(cfg.Addr, ":")
	if !ok {
		port = "3306"
	}
	args := []string{"--protocol=tcp", "-h", host, "-P", port, "-u", cfg.User}
	if cfg.Passwd != "" {
		args = append(args, "--password="+cfg.Passwd)
	}
	return args
}
