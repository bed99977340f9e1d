package shardgorm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/idplugin"
	"github.com/idforge/idforge/internal/testdb"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardgorm"
)

type Course struct {
	ID        int64  `gorm:"primaryKey" idgen:"snowflake"`
	Name      string `gorm:"size:64;index"`
	UserID    int64
	Status    string `gorm:"size:8"`
	CreatedAt time.Time
}

func openGorm(t *testing.T, d testdb.DB, reg *engine.Registry) *gorm.DB {
	t.Helper()
	var dial gorm.Dialector
	switch d.Name {
	case "sqlite":
		dial = sqlite.Open(d.DSN)
	case "mariadb":
		dial = mysql.Open(d.DSN)
	default:
		dial = postgres.Open(d.DSN)
	}
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("open %s: %v", d.Name, err)
	}
	if err := db.Use(idplugin.New(idplugin.WithRegistry(reg))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	return db
}

func gormRepo(t *testing.T, b shardtest.Backend, opts ...sharding.Option) *shardgorm.Repository {
	t.Helper()
	dbs := b.Open(t)
	reg := shardtest.Registry(t)
	repo, err := shardgorm.New(shardtest.CourseRouter(t), []*gorm.DB{openGorm(t, dbs[0], reg), openGorm(t, dbs[1], reg)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Migrate(context.Background(), &Course{}); err != nil {
		t.Fatal(err)
	}
	return repo
}

// readBack reads every shard and checks each row is where its ID routes.
func readBack(t *testing.T, repo *shardgorm.Repository) (map[int64]Course, map[string]int) {
	t.Helper()
	rows := map[int64]Course{}
	counts := map[string]int{}
	err := repo.ForEach(context.Background(), func(s sharding.Shard, db *gorm.DB) error {
		var got []Course
		if err := db.Find(&got).Error; err != nil {
			return err
		}
		for _, c := range got {
			want, err := repo.Router().Route(c.ID)
			if err != nil {
				return err
			}
			if want != s {
				t.Errorf("row %d found in %s, routes to %s", c.ID, s, want)
			}
			if _, dup := rows[c.ID]; dup {
				t.Errorf("row %d found twice", c.ID)
			}
			rows[c.ID] = c
		}
		counts[s.String()] = len(got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, counts
}

func TestGormBatchSplitting(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo := gormRepo(t, b, sharding.WithBatchSize(300))
			batch := make([]Course, 2500)
			for i := range batch {
				batch[i] = Course{Name: fmt.Sprintf("course %d", i), UserID: int64(i % 7), Status: "1"}
			}
			if err := repo.Create(ctx, batch); err != nil {
				t.Fatal(err)
			}
			one := &Course{Name: "single", Status: "2"}
			if err := repo.Create(ctx, one); err != nil {
				t.Fatal(err)
			}
			ptrs := []*Course{{Name: "p0"}, {Name: "p1"}, {Name: "p2"}}
			if err := repo.Create(ctx, &ptrs); err != nil {
				t.Fatal(err)
			}
			all := append(append(batch, *one), *ptrs[0], *ptrs[1], *ptrs[2])

			rows, counts := readBack(t, repo)
			if len(rows) != len(all) {
				t.Fatalf("read back %d rows, inserted %d", len(rows), len(all))
			}
			total := 0
			for _, n := range counts {
				total += n
			}
			if total != len(all) || len(counts) != 4 {
				t.Errorf("shard counts %v add up to %d, want %d over 4 shards", counts, total, len(all))
			}
			for _, c := range all {
				if c.ID == 0 || c.CreatedAt.IsZero() {
					t.Fatalf("row %q not written back: %+v", c.Name, c)
				}
				got, ok := rows[c.ID]
				if !ok || got.Name != c.Name || got.Status != c.Status || got.UserID != c.UserID {
					t.Errorf("row %d: read back %+v, inserted %+v", c.ID, got, c)
				}
			}
			// A still fake clock makes consecutive sequences: 2,500 IDs mod 4
			// split 625 per shard under the ShardingSphere rule.
			for s, n := range counts {
				if n < 625 {
					t.Errorf("shard %s has %d rows, want at least 625 (%v)", s, n, counts)
				}
			}
			t.Logf("%s: %v", b.Name, sharding.Measure(counts))
		})
	}
}

func TestGormFindAndScope(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo := gormRepo(t, b)
			rows := []Course{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			for _, c := range rows {
				var got Course
				if err := repo.Find(ctx, c.ID, &got); err != nil || got.Name != c.Name {
					t.Errorf("Find(%d) = %+v, %v; want %q", c.ID, got, err, c.Name)
				}
			}
			missing := rows[3].ID + 1
			var got Course
			if err := repo.Find(ctx, missing, &got); !errors.Is(err, gorm.ErrRecordNotFound) || !errors.Is(err, sharding.ErrNotFound) {
				t.Errorf("Find(missing %d): err = %v, want sharding.ErrNotFound and gorm.ErrRecordNotFound", missing, err)
			}

			db, s, err := repo.DB(rows[1].ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Where("id = ?", rows[1].ID).Update("status", "done").Error; err != nil {
				t.Fatal(err)
			}
			if err := repo.Find(ctx, rows[1].ID, &got); err != nil || got.Status != "done" {
				t.Errorf("after update in %s: %+v, %v", s, got, err)
			}
			// Scope picks the table on a database the caller chose.
			var n int64
			base, s2, _ := repo.DB(rows[2].ID)
			if err := base.Session(&gorm.Session{NewDB: true}).Model(&Course{}).Scopes(repo.Scope(rows[2].ID)).
				Where("id = ?", rows[2].ID).Count(&n).Error; err != nil || n != 1 {
				t.Errorf("Scope count in %s = %d, %v", s2, n, err)
			}
			if err := base.Scopes(repo.Scope(-1)).Count(&n).Error; !errors.Is(err, engine.ErrInvalidID) {
				t.Errorf("Scope(-1): err = %v", err)
			}
		})
	}
}

func TestGormShardError(t *testing.T) {
	ctx := context.Background()
	repo := gormRepo(t, shardtest.Backends[0])
	db3, s3, _ := repo.DB(3) // id 3 → m1.course_1
	if err := db3.Migrator().DropTable(s3.TableName); err != nil {
		t.Fatal(err)
	}
	batch := make([]Course, 8)
	err := repo.Create(ctx, batch)
	var se *sharding.ShardError
	if !errors.As(err, &se) || se.Shard.String() != "m1.course_1" || se.Rows != 2 ||
		!strings.Contains(err.Error(), "insert 2 rows into m1.course_1") {
		t.Fatalf("Create with a missing table: err = %v, want a ShardError for m1.course_1", err)
	}
	_, counts := readBackExcept(t, repo, s3)
	if counts["m0.course_1"] != 2 || counts["m0.course_2"] != 2 || counts["m1.course_2"] != 0 {
		t.Errorf("after the failure: %v; want the shards before m1.course_1 written, the one after not", counts)
	}
}

func readBackExcept(t *testing.T, repo *shardgorm.Repository, skip sharding.Shard) (int, map[string]int) {
	t.Helper()
	counts := map[string]int{}
	total := 0
	err := repo.ForEach(context.Background(), func(s sharding.Shard, db *gorm.DB) error {
		if s == skip {
			return nil
		}
		var n int64
		if err := db.Count(&n).Error; err != nil {
			return err
		}
		counts[s.String()] = int(n)
		total += int(n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, counts
}

func TestGormConfigErrors(t *testing.T) {
	reg := shardtest.Registry(t)
	d := testdb.SQLite(t)
	db := openGorm(t, d, reg)
	r := shardtest.CourseRouter(t)
	if _, err := shardgorm.New(r, []*gorm.DB{db}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("one db for a two-database router: err = %v", err)
	}
	if _, err := shardgorm.New(r, []*gorm.DB{db, nil}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil db: err = %v", err)
	}
	if _, err := shardgorm.New(nil, []*gorm.DB{db}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil router: err = %v", err)
	}
	if _, err := shardgorm.New(r, []*gorm.DB{db, db}, sharding.WithBatchSize(-1)); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("batch size -1: err = %v", err)
	}
	repo, err := shardgorm.New(r, []*gorm.DB{db, db})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type Untagged struct {
		ID   int64
		Name string
	}
	if err := repo.Create(ctx, &Untagged{Name: "x"}); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("untagged model: err = %v, want ErrInvalidID for the missing ID", err)
	}
	type StringKey struct {
		Code string `gorm:"primaryKey" idgen:"snowflake,format=radix62"`
	}
	if err := repo.Create(ctx, &StringKey{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("string key: err = %v", err)
	}
	if err := repo.Create(ctx, Course{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("struct by value: err = %v", err)
	}
	if err := repo.Create(ctx, []*Course{nil}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil row: err = %v", err)
	}
	pinned := &Course{ID: -4, Name: "negative"}
	if err := repo.Create(ctx, pinned); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("negative pinned ID: err = %v", err)
	}
}

// WithShardKey routes by another integer field than the primary key.
func TestGormShardKey(t *testing.T) {
	ctx := context.Background()
	repo := gormRepo(t, shardtest.Backends[0], sharding.WithShardKey("UserID"))
	rows := []Course{{Name: "a", UserID: 100}, {Name: "b", UserID: 101}, {Name: "c", UserID: 102}, {Name: "d", UserID: 103}}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, c := range rows {
		var got Course
		if err := repo.Find(ctx, c.UserID, &got); err != nil || got.ID != c.ID {
			t.Errorf("Find(user %d) = %+v, %v; want id %d", c.UserID, got, err, c.ID)
		}
		db, s, _ := repo.DB(c.UserID)
		var n int64
		if err := db.Where("id = ?", c.ID).Count(&n).Error; err != nil || n != 1 {
			t.Errorf("row of user %d not in %s: %d, %v", c.UserID, s, n, err)
		}
	}
}

// An interval router behind the repository: rows land in the month their ID
// was issued in.
func TestGormInterval(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	g, err := snowflake.New(2, snowflake.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	r := shardtest.MonthRouter(t)
	repo, err := shardgorm.New(r, []*gorm.DB{openGorm(t, testdb.SQLite(t), reg)})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Migrate(ctx, &Course{}); err != nil {
		t.Fatal(err)
	}
	var rows []Course
	for i := range 36 { // one row every ten days through 2026
		c := Course{Name: fmt.Sprint(i)}
		if err := repo.Create(ctx, &c); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, c)
		fc.Advance(10 * 24 * time.Hour)
	}
	months := map[string]int{}
	err = repo.ForEach(ctx, func(s sharding.Shard, db *gorm.DB) error {
		var got []Course
		if err := db.Find(&got).Error; err != nil {
			return err
		}
		for _, c := range got {
			p, _ := snowflake.Default.Decode(c.ID)
			if want := "course_" + p.Time.Format("200601"); want != s.TableName {
				t.Errorf("row %s issued %s found in %s", c.Name, p.Time, s.TableName)
			}
		}
		months[s.TableName] = len(got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range months {
		total += n
	}
	if len(months) != 12 || total != 36 || months["course_202601"] != 3 || months["course_202602"] != 3 {
		t.Errorf("rows per month = %v", months)
	}
}

func TestNewGormNeedsThePlugin(t *testing.T) {
	r, err := sharding.NewMod(sharding.Mod{Databases: 1, Tables: 2, TablePattern: "t_%d"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shardgorm.New(r, []*gorm.DB{db}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "plugin") {
		t.Fatalf("NewGorm on a database without the plugin: %v, want ErrInvalidConfig naming the plugin", err)
	}
}

// Migrate prepares every shard's table, so the ID column the plugin fills is
// a plain BIGINT, not AUTO_INCREMENT or BIGSERIAL.
func TestMigrateMakesPlainIDColumns(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			repo := gormRepo(t, b)
			err := repo.ForEach(context.Background(), func(s sharding.Shard, db *gorm.DB) error {
				sqlDB, err := db.DB()
				if err != nil {
					return err
				}
				d := testdb.DB{Name: b.Name}
				if d.AutoIncrement(t, sqlDB, s.TableName) {
					t.Errorf("%s: the id column is auto-increment", s)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Exec runs one statement in every shard; a statement without {table} is
// refused before anything runs.
func TestGormExec(t *testing.T) {
	ctx := context.Background()
	repo := gormRepo(t, shardtest.Backends[0])
	rows := make([]Course, 8)
	for i := range rows {
		rows[i].Status = "old"
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := repo.Exec(ctx, "UPDATE {table} SET status = ? WHERE status = ?", "new", "old"); err != nil {
		t.Fatal(err)
	}
	for _, c := range rows {
		var got Course
		if err := repo.Find(ctx, c.ID, &got); err != nil || got.Status != "new" {
			t.Errorf("row %d after Exec: %+v, %v", c.ID, got, err)
		}
	}
	if err := repo.Exec(ctx, "DELETE FROM course_1"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Exec without {table}: err = %v", err)
	}
	if n, _ := countAll(t, repo); n != len(rows) {
		t.Errorf("%d rows left, want %d", n, len(rows))
	}
}

func countAll(t *testing.T, repo *shardgorm.Repository) (int, map[string]int) {
	return readBackExcept(t, repo, sharding.Shard{})
}
