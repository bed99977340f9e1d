package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/shardgorm"
)

// Course is a row's columns; every shard table has them. Each generator gets
// its own Go type because the idgen tag names the generator.
type Course struct {
	Name      string `gorm:"size:64"`
	Generator string `gorm:"size:32;index"`
}

type plainCourse struct {
	ID int64 `gorm:"primaryKey;autoIncrement:false" idgen:"plain-snowflake"`
	Course
}

type snowflakeCourse struct {
	ID int64 `gorm:"primaryKey;autoIncrement:false" idgen:"snowflake"`
	Course
}

type chainCourse struct {
	ID int64 `gorm:"primaryKey;autoIncrement:false" idgen:"chain,name=course"`
	Course
}

var generators = []struct {
	name string
	row  func(c Course) any
}{
	{"plain-snowflake", func(c Course) any { return &plainCourse{Course: c} }},
	{"idforge-snowflake", func(c Course) any { return &snowflakeCourse{Course: c} }},
	{"segment-chain", func(c Course) any { return &chainCourse{Course: c} }},
}

// router is ShardingSphere's course example, written for sharding.Mod.
func router() (*sharding.Router, error) {
	return sharding.NewMod(sharding.Mod{
		Databases: "m{0..1}", Tables: "course_{1..2}",
		TableRule: "(id+1)%4/2+1",
	})
}

// env is the two shard databases plus where the ID tables live.
type env struct {
	dbs     []*gorm.DB
	ids     *sql.DB // holds the idforge_segment and idforge_machine tables
	desc    string
	cleanup func() error
	kept    string
}

func demo(ctx context.Context, o options, progress io.Writer) (_ *report, err error) {
	r, err := router()
	if err != nil {
		return nil, err
	}
	var e *env
	if o.dsn == "" {
		e, err = openSQLite(o.keep)
	} else {
		e, err = openServer(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := e.cleanup(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	reg, err := registry(ctx, e.ids, o.rate)
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	for _, db := range e.dbs {
		if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
			return nil, err
		}
	}
	repo, err := shardgorm.New(e.dbs, r)
	if err != nil {
		return nil, err
	}
	if err := repo.Migrate(ctx, &plainCourse{}); err != nil {
		return nil, err
	}
	// Start from empty shards, also on a server database kept from a past run.
	if err := repo.Exec(ctx, "DELETE FROM {table}"); err != nil {
		return nil, err
	}

	rep := &report{N: o.n, Rule: r.String(), Rate: o.rate, Databases: e.desc, Kept: e.kept}
	for _, g := range generators {
		if err := insert(ctx, repo, o, g.name, g.row, progress); err != nil {
			return nil, fmt.Errorf("%s: %w", g.name, err)
		}
		counts, err := countRows(ctx, repo, g.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.name, err)
		}
		rep.Generators = append(rep.Generators, newGeneratorReport(g.name, counts))
	}
	return rep, nil
}

// registry holds the three generators: idforge's snowflake on a machine ID
// from the SQL store, a segment chain per name on the same store, and the
// plain per-tick-reset snowflake for contrast (machine 1023, so its IDs can
// never collide with the store-assigned machine's). At a rate of 1000
// inserts/s or less the plain one draws at most one ID per tick.
func registry(ctx context.Context, ids *sql.DB, rate float64) (*demoRegistry, error) {
	// The demo's database files are new on every run: nothing was ever
	// handed out from them, so the store is declared brand-new.
	st, err := sqlstore.Open(ctx, ids, sqlstore.Settings{CreateTables: true, Init: true})
	if err != nil {
		return nil, err
	}
	reg, err := idforge.New(ctx, idforge.Settings{
		Namespace: "shardingdemo",
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Store:     st,
		Chain:     segment.Settings{Step: 100},
	})
	if err != nil {
		return nil, err
	}
	plain := snowflake.Default
	plain.SequenceResetThreshold = -1
	g, err := snowflake.New(int64(1)<<plain.MachineBits-1, snowflake.Settings{Layout: plain})
	if err == nil {
		var gen engine.Generator = g
		if rate > 0 && rate <= 1000 {
			gen = &onePerTick{g: g, layout: plain}
		}
		return &demoRegistry{Registry: reg, plain: gen}, nil
	}
	reg.Close()
	return nil, err
}

// demoRegistry adds kind "plain-snowflake" to the registry's kinds.
type demoRegistry struct {
	*idforge.Registry
	plain engine.Generator
}

// Generator returns the plain snowflake generator for its kind, the
// registry's generators for the others.
func (r *demoRegistry) Generator(ctx context.Context, kind, name string) (engine.Generator, error) {
	if kind == "plain-snowflake" && name == "" {
		return r.plain, nil
	}
	return r.Registry.Generator(ctx, kind, name)
}

func insert(ctx context.Context, repo *shardgorm.Repository, o options, name string, row func(Course) any, progress io.Writer) error {
	p := newPacer(o.rate)
	for i := range o.n {
		if err := p.wait(ctx); err != nil {
			return err
		}
		if err := repo.Create(ctx, row(Course{Name: fmt.Sprintf("course %d", i), Generator: name})); err != nil {
			return err
		}
		if progress != nil && (i%25 == 0 || i == o.n-1) {
			drawProgress(progress, name, i+1, o.n)
		}
	}
	return nil
}

func drawProgress(w io.Writer, name string, done, total int) {
	const width = 30
	filled := done * width / total
	fmt.Fprintf(w, "\r%-18s [%s%s] %d/%d", name, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, total)
	if done == total {
		fmt.Fprint(w, "\r\033[K")
	}
}

// countRows reads each shard's row count for one generator back from the databases.
func countRows(ctx context.Context, repo *shardgorm.Repository, name string) (map[string]int, error) {
	counts := map[string]int{}
	err := repo.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
		var n int64
		if err := db.Where("generator = ?", name).Count(&n).Error; err != nil {
			return err
		}
		counts[s.String()] = int(n)
		return nil
	})
	return counts, err
}

func gormConfig() *gorm.Config {
	return &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true}
}

func openSQLite(keep bool) (*env, error) {
	dir, err := os.MkdirTemp("", "shardingdemo-")
	if err != nil {
		return nil, err
	}
	e := &env{desc: "SQLite files m0.db and m1.db"}
	var closers []func() error
	e.cleanup = func() error {
		for _, c := range closers {
			c()
		}
		if keep {
			return nil
		}
		return os.RemoveAll(dir)
	}
	if keep {
		e.kept = dir
	}
	open := func(file string) (*gorm.DB, error) {
		db, err := gorm.Open(sqlite.Open(filepath.Join(dir, file)+"?_pragma=busy_timeout(5000)"), gormConfig())
		if err != nil {
			return nil, err
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		closers = append(closers, sqlDB.Close)
		return db, nil
	}
	for _, file := range []string{"m0.db", "m1.db"} {
		db, err := open(file)
		if err != nil {
			e.cleanup()
			return nil, err
		}
		e.dbs = append(e.dbs, db)
	}
	ids, err := open("ids.db")
	if err == nil {
		e.ids, err = ids.DB()
	}
	if err != nil {
		e.cleanup()
		return nil, err
	}
	return e, nil
}

// openServer creates (if needed) and opens <prefix>m0 and <prefix>m1 on the
// server the DSN template names; the ID tables go into m0.
func openServer(ctx context.Context, o options) (*env, error) {
	isPG := strings.HasPrefix(o.dsn, "postgres://") || strings.HasPrefix(o.dsn, "postgresql://")
	dialector := func(name string) gorm.Dialector {
		dsn := strings.ReplaceAll(o.dsn, "{db}", name)
		if isPG {
			return postgres.Open(dsn)
		}
		return mysql.Open(dsn)
	}
	adminDB := ""
	if isPG {
		adminDB = "postgres"
	}
	admin, err := gorm.Open(dialector(adminDB), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", o.dsn, err)
	}
	adminSQL, err := admin.DB()
	if err != nil {
		return nil, err
	}
	names := []string{o.prefix + "m0", o.prefix + "m1"}
	e := &env{desc: fmt.Sprintf("databases %s and %s", names[0], names[1])}
	var closers []func() error
	var created []string // only these are dropped: a database that existed is left alone
	e.cleanup = func() error {
		for _, c := range closers {
			c()
		}
		defer adminSQL.Close()
		if o.keep {
			return nil
		}
		for _, n := range created {
			q := "DROP DATABASE IF EXISTS " + n
			if isPG {
				q += " WITH (FORCE)"
			}
			if err := admin.WithContext(context.Background()).Exec(q).Error; err != nil {
				return err
			}
		}
		return nil
	}
	if o.keep {
		e.kept = e.desc
	}
	for _, n := range names {
		made, err := createDatabase(ctx, admin, n, isPG)
		if err != nil {
			e.cleanup()
			return nil, err
		}
		if made {
			created = append(created, n)
		}
		db, err := gorm.Open(dialector(n), gormConfig())
		if err != nil {
			e.cleanup()
			return nil, err
		}
		sqlDB, err := db.DB()
		if err != nil {
			e.cleanup()
			return nil, err
		}
		closers = append(closers, sqlDB.Close)
		e.dbs = append(e.dbs, db)
	}
	e.ids, _ = e.dbs[0].DB()
	return e, nil
}

// createDatabase creates name unless it exists, and reports whether it did.
func createDatabase(ctx context.Context, admin *gorm.DB, name string, isPG bool) (bool, error) {
	var n int64
	q := "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?"
	if isPG {
		q = "SELECT count(*) FROM pg_database WHERE datname = ?"
	}
	if err := admin.WithContext(ctx).Raw(q, name).Scan(&n).Error; err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	return true, admin.WithContext(ctx).Exec("CREATE DATABASE " + name).Error
}

// onePerTick draws at most one ID per millisecond tick, which is what a rate
// of 1000 inserts/s or less means: the pacer spaces the inserts, but the
// time between its wake-up and the draw varies, and two IDs drawn in one
// tick would take sequence 1 and another shard. So the plain snowflake's
// skew shows the same on every run, as the README prints it.
type onePerTick struct {
	mu     sync.Mutex
	g      *snowflake.Generator
	layout snowflake.Layout
	last   int64 // Unix ms of the last ID's tick
}

func (p *onePerTick) NextID(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for time.Now().UnixMilli() <= p.last {
		if err := clock.System.Sleep(ctx, time.Until(time.UnixMilli(p.last+1))); err != nil {
			return 0, err
		}
	}
	id, err := p.g.NextID(ctx)
	if err == nil {
		at, _, _, _ := p.layout.Decode(id)
		p.last = at.UnixMilli()
	}
	return id, err
}
