package shardgorm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardgorm"
	"github.com/idforge/idforge/tests/testdb"
)

type Course struct {
	ID        int64  `gorm:"primaryKey" idgen:"snowflake"`
	Name      string `gorm:"size:64;index"`
	UserID    int64
	Status    string `gorm:"size:8"`
	CreatedAt time.Time
}

// openGorm opens d with the plugin drawing from reg, with GORM's default
// transactions off: the repository's parts are atomic without them.
func openGorm(t testing.TB, d testdb.DB, reg engine.Provider) *gorm.DB {
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
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		t.Fatalf("open %s: %v", d.Name, err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	return db
}

func gormRepo(t *testing.T, b shardtest.Backend, s ...sharding.Settings) (*shardgorm.Repository, []*gorm.DB) {
	t.Helper()
	dbs := b.Open(t)
	reg := shardtest.Registry(t)
	gdbs := []*gorm.DB{openGorm(t, dbs[0], reg), openGorm(t, dbs[1], reg)}
	repo, err := shardgorm.New(gdbs, shardtest.CourseRouter(t), s...)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Migrate(context.Background(), &Course{}); err != nil {
		t.Fatal(err)
	}
	return repo, gdbs
}

var _ shardtest.Repository[gorm.DB] = (*shardgorm.Repository)(nil)

// The contract both repositories pass, on every backend.
func TestGormContract(t *testing.T) {
	shardtest.Harness[gorm.DB, Course]{
		Open: func(t *testing.T, d testdb.DB, reg engine.Provider) *gorm.DB { return openGorm(t, d, reg) },
		New: func(r *sharding.Router, _ engine.Provider, dbs []*gorm.DB, s ...sharding.Settings) (shardtest.Repository[gorm.DB], error) {
			return shardgorm.New(dbs, r, s...)
		},
		Migrate: func(ctx context.Context, repo shardtest.Repository[gorm.DB]) error {
			return repo.(*shardgorm.Repository).Migrate(ctx, &Course{})
		},
		In: func(ctx context.Context, repo shardtest.Repository[gorm.DB], key int64, db *gorm.DB) (shardtest.TxRepository, func(bool) error, error) {
			tx := db.WithContext(ctx).Begin()
			if tx.Error != nil {
				return nil, nil, tx.Error
			}
			in, err := repo.(*shardgorm.Repository).In(key, tx)
			return in, func(commit bool) error {
				if commit {
					return tx.Commit().Error
				}
				return tx.Rollback().Error
			}, err
		},
		Row:    func(name string, user int64) Course { return Course{Name: name, UserID: user, Status: "1"} },
		WithID: func(c Course, id int64) Course { c.ID = id; return c },
		ID:     func(c *Course) int64 { return c.ID },
		User:   func(c *Course) int64 { return c.UserID },
		Name:   func(c *Course) string { return c.Name },
		Same: func(got, want Course) bool {
			return got.ID == want.ID && got.Name == want.Name && got.UserID == want.UserID && got.Status == want.Status &&
				!want.CreatedAt.IsZero() // written back by GORM
		},
		Rows: func(ctx context.Context, _ sharding.Shard, db *gorm.DB) ([]Course, error) {
			var got []Course
			return got, db.Find(&got).Error
		},
		Exec:    func(db *gorm.DB, query string) error { return db.Exec(query).Error },
		Columns: 5, // id, name, user_id, status, created_at
	}.Run(t)
}

func TestGormFindAndIn(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo, _ := gormRepo(t, b)
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
			// In's DB picks the table in a transaction the caller began.
			var n int64
			base, s2, _ := repo.DB(rows[2].ID)
			tx := base.Begin()
			defer tx.Rollback()
			in, err := repo.In(rows[2].ID, tx)
			if err != nil {
				t.Fatal(err)
			}
			indb, _, err := in.DB(rows[2].ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := indb.Model(&Course{}).Where("id = ?", rows[2].ID).Count(&n).Error; err != nil || n != 1 {
				t.Errorf("count in %s through In's DB = %d, %v", s2, n, err)
			}
			if _, _, err := in.DB(-1); !errors.Is(err, engine.ErrInvalidID) {
				t.Errorf("In's DB(-1): err = %v", err)
			}
			if _, _, err := in.DB(rows[3].ID); !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("In's DB of another shard: err = %v, want sharding.ErrWrongShard", err)
			}
		})
	}
}

func TestGormConfigErrors(t *testing.T) {
	reg := shardtest.Registry(t)
	db := openGorm(t, testdb.SQLite(t), reg)
	r := shardtest.CourseRouter(t)
	ctx := context.Background()
	repo, err := shardgorm.New([]*gorm.DB{db, openGorm(t, testdb.SQLite(t), reg)}, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shardgorm.New([]*gorm.DB{db, db.Session(&gorm.Session{})}, r); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a database and a session of it: err = %v, want engine.ErrInvalidConfig", err)
	}
	if _, err := shardgorm.New([]*gorm.DB{{}, {}}, r); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "zero gorm.DB") {
		t.Errorf("zero gorm.DB values: err = %v, want engine.ErrInvalidConfig naming them", err)
	}
	for name, zero := range map[string]*shardgorm.Repository{"zero": {}, "nil": nil} {
		shardtest.Refuses[gorm.DB, Course](t, "a "+name+" Repository", zero, ctx, "make it with New")
		if _, err := zero.In(1, db.Begin()); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("In on a %s Repository: err = %v, want engine.ErrInvalidConfig", name, err)
		}
		if err := zero.Migrate(ctx, &Course{}); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("Migrate on a %s Repository: err = %v, want engine.ErrInvalidConfig", name, err)
		}
	}
	var none context.Context
	if err := repo.Migrate(none, &Course{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Migrate with a nil context: err = %v, want engine.ErrInvalidConfig", err)
	}
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
	first := &Course{Name: "before the nil row"}
	for _, v := range []any{[]*Course{first, nil}, (*Course)(nil), nil} {
		err := repo.Create(ctx, v)
		if !errors.Is(err, engine.ErrInvalidData) || !errors.Is(err, gorm.ErrInvalidData) || errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("nil row in %T: err = %v, want engine.ErrInvalidData and gorm.ErrInvalidData", v, err)
		}
	}
	if first.ID != 0 {
		t.Errorf("a batch with a nil row drew ID %d: rows are checked before any ID is drawn", first.ID)
	}
	pinned := &Course{ID: -4, Name: "negative"}
	if err := repo.Create(ctx, pinned); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("negative pinned ID: err = %v", err)
	}
}

// An interval router behind the repository: rows land in the month their ID
// was issued in.
func TestGormInterval(t *testing.T) {
	ctx := context.Background()
	fc := clocktest.NewFake(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	g, err := snowflake.New(2, snowflake.Settings{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	reg := genreg.New()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	r := shardtest.MonthRouter(t, fc)
	repo, err := shardgorm.New([]*gorm.DB{openGorm(t, testdb.SQLite(t), reg)}, r)
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
			at, _, _, _ := snowflake.Default.Decode(c.ID)
			if want := "course_" + at.Format("200601"); want != s.TableName {
				t.Errorf("row %s issued %s found in %s", c.Name, at, s.TableName)
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
	r, err := sharding.NewMod(sharding.Mod{Tables: "t_{0..1}"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shardgorm.New([]*gorm.DB{db}, r); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "plugin") {
		t.Fatalf("NewGorm on a database without the plugin: %v, want ErrInvalidConfig naming the plugin", err)
	}
}

// Migrate prepares every shard's table, so the ID column the plugin fills is
// a plain BIGINT, not AUTO_INCREMENT or BIGSERIAL.
func TestMigrateMakesPlainIDColumns(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			repo, _ := gormRepo(t, b)
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

// Exec runs one statement in every shard.
func TestGormExec(t *testing.T) {
	ctx := context.Background()
	repo, _ := gormRepo(t, shardtest.Backends[0])
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
}

type Lecture struct {
	ID   int64  `gorm:"primaryKey" idgen:"chain,name=lecture"`
	Name string `gorm:"size:64;not null"`
}

type Invoice struct {
	ID     int64 `gorm:"primaryKey" idgen:"snowflake"`
	Number int64 `idgen:"segment,name=invoice"`
}

// A store that forgot the lecture sequence restarts it above every shard.
func TestGormFloors(t *testing.T) {
	shardtest.FloorHarness[gorm.DB]{
		Open: func(t *testing.T, d testdb.DB, reg engine.Provider) *gorm.DB { return openGorm(t, d, reg) },
		New: func(t *testing.T, r *sharding.Router, dbs []*gorm.DB, _ engine.Provider) shardtest.Repository[gorm.DB] {
			repo, err := shardgorm.New(dbs, r)
			if err != nil {
				t.Fatal(err)
			}
			return repo
		},
		Migrate: func(ctx context.Context, repo shardtest.Repository[gorm.DB]) error {
			return repo.(*shardgorm.Repository).Migrate(ctx, &Lecture{})
		},
		Exec: func(db *gorm.DB, query string) error { return db.Exec(query).Error },
		IDs: func(db *gorm.DB, query string) ([]int64, error) {
			var ids []int64
			return ids, db.Raw(query).Scan(&ids).Error
		},
		Lectures: func(ctx context.Context, repo shardtest.Repository[gorm.DB], n int) ([]int64, error) {
			rows := make([]Lecture, n)
			for i := range rows {
				rows[i].Name = fmt.Sprint("lecture ", i)
			}
			err := repo.Create(ctx, rows)
			ids := make([]int64, n)
			for i, l := range rows {
				ids[i] = l.ID
			}
			return ids, err
		},
		Invoice: func(ctx context.Context, repo shardtest.Repository[gorm.DB]) (int64, error) {
			var in Invoice
			err := repo.Create(ctx, &in)
			return in.Number, err
		},
	}.Run(t)
}

// DB(key) gives a session that starts every chain afresh, is safe to share
// between goroutines, and is bound to its shard: rows of other shards, in
// a transaction of it too, and other tables are refused; In with a
// transaction of another database is refused.
func TestGormBoundSessions(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo, dbs := gormRepo(t, b)
			rows := make([]Course, 8)
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			db, s, err := repo.DB(rows[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			var same []Course // the rows of rows[0]'s shard
			for _, c := range rows {
				if got, _ := shardtest.CourseRouter(t).Route(c.ID); got == s {
					same = append(same, c)
				}
			}
			if len(same) != 2 {
				t.Fatalf("%d rows in %s, want 2", len(same), s)
			}
			for i, c := range same { // the second Update through the session finds its row too
				res := db.WithContext(ctx).Where("id = ?", c.ID).Update("status", fmt.Sprint("u", i))
				if res.Error != nil || res.RowsAffected != 1 {
					t.Errorf("update %d through the session: %d rows, %v; want 1", i, res.RowsAffected, res.Error)
				}
			}
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					var n int64
					if err := db.Where("id = ?", same[i%2].ID).Count(&n).Error; err != nil || n != 1 {
						t.Errorf("count through the shared session: %d, %v", n, err)
					}
				})
			}
			wg.Wait()

			// Four new rows in a transaction of m0.course_1's session: three
			// belong elsewhere, so none is written.
			four := make([]Course, 4)
			err = db.Transaction(func(tx *gorm.DB) error { return tx.Create(&four).Error })
			if !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("four new rows through %s's session: err = %v, want sharding.ErrWrongShard", s, err)
			}
			one := Course{ID: same[1].ID + 4, Name: "here"} // +4 keeps the course rule's shard
			if err := db.Create(&one).Error; err != nil {
				t.Errorf("a row of the session's shard: %v", err)
			}
			other := Course{ID: same[1].ID + 5, Name: "there"}
			if err := db.Table("course_2").Create(&other).Error; !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("a create on another table through the session: err = %v, want sharding.ErrWrongShard", err)
			}
			_, counts := shardtest.Harness[gorm.DB, Course]{Rows: func(_ context.Context, _ sharding.Shard, db *gorm.DB) ([]Course, error) {
				var got []Course
				return got, db.Find(&got).Error
			}, ID: func(c *Course) int64 { return c.ID }}.ReadBack(t, shardtest.CourseRouter(t), repo)
			if counts[s.String()] != 3 || len(counts) != 4 {
				t.Errorf("rows per shard = %v, want 2 each and the one row more in %s", counts, s)
			}

			// In takes a transaction of the key's database; another's fails.
			m1 := rows[1].ID // course rule: odd IDs are in m1
			tx0 := dbs[0].Begin()
			defer tx0.Rollback()
			if _, err := repo.In(m1, tx0); !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("In(%d) with a transaction of m0: err = %v, want sharding.ErrWrongShard", m1, err)
			}
			tx1 := dbs[1].Begin()
			defer tx1.Rollback()
			in, err := repo.In(m1, tx1)
			if err != nil {
				t.Fatal(err)
			}
			var got Course
			if err := in.Find(ctx, m1, &got); err != nil || got.ID != m1 {
				t.Errorf("In(%d) on m1: Find = %+v, %v", m1, got, err)
			}
		})
	}
}

// In writes behind a savepoint on sessions that prepare their statements
// too (MySQL prepares no SAVEPOINT).
func TestGormInPreparedStatements(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo, _ := gormRepo(t, b)
			db, _, err := repo.DB(4)
			if err != nil {
				t.Fatal(err)
			}
			tx := db.Session(&gorm.Session{PrepareStmt: true}).Begin()
			in, err := repo.In(4, tx)
			if err != nil {
				t.Fatal(err)
			}
			rows := []Course{{ID: 4, Name: "a"}, {ID: 8, Name: "b"}}
			if err := in.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit().Error; err != nil {
				t.Fatal(err)
			}
			var got Course
			if err := repo.Find(ctx, 8, &got); err != nil || got.Name != "b" {
				t.Errorf("Find(8) after the commit = %+v, %v", got, err)
			}
		})
	}
}

type Note struct {
	ID        int64 `gorm:"primaryKey" idgen:"snowflake"`
	Body      string
	WrittenAt time.Time `gorm:"index"`
	DeletedAt gorm.DeletedAt
}

// Page and Count leave soft-deleted rows out, as GORM's Find does (on
// MariaDB and PostgreSQL a database's shards are read in one statement the
// repository writes); a page ordered by a time column is merged in order.
func TestGormPageSoftDeleteAndTime(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo, _ := gormRepo(t, b)
			if err := repo.Migrate(ctx, &Note{}); err != nil {
				t.Fatal(err)
			}
			base := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
			notes := make([]Note, 40)
			for i := range notes {
				// Times out of ID order, with ties.
				notes[i] = Note{Body: fmt.Sprint("note ", i), WrittenAt: base.Add(time.Duration((i*7)%13) * time.Second)}
			}
			if err := repo.Create(ctx, notes); err != nil {
				t.Fatal(err)
			}
			var gone []int64
			for i := 0; i < len(notes); i += 5 {
				gone = append(gone, notes[i].ID)
			}
			if n, err := repo.Delete(ctx, sharding.Query{IDs: gone}, &Note{}); err != nil || n != int64(len(gone)) {
				t.Fatalf("Delete: %d, %v", n, err)
			}
			if n, err := repo.Count(ctx, sharding.Query{}, &Note{}); err != nil || n != 32 {
				t.Errorf("Count after soft-deleting 8 of 40 = %d, %v", n, err)
			}
			var all []Note
			q := sharding.Query{Order: "WrittenAt DESC", Limit: 7}
			for {
				var page []Note
				if err := repo.Page(ctx, q, &page); err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				all = append(all, page...)
				q.After = &page[len(page)-1]
			}
			if len(all) != 32 {
				t.Fatalf("paged %d notes, want the 32 not deleted", len(all))
			}
			for i, n := range all {
				if n.DeletedAt.Valid {
					t.Errorf("paged a deleted note %d", n.ID)
				}
				if i > 0 {
					p := all[i-1]
					if n.WrittenAt.After(p.WrittenAt) || n.WrittenAt.Equal(p.WrittenAt) && n.ID > p.ID {
						t.Errorf("note %d (%v) after note %d (%v)", n.ID, n.WrittenAt, p.ID, p.WrittenAt)
					}
				}
			}
		})
	}
}

// A key column whose name needs quoting ("row id") is read back by the
// retry of Create that skips the rows stored.
func TestGormQuotedKey(t *testing.T) {
	type Spaced struct {
		ID   int64  `gorm:"column:row id;primaryKey" idgen:"snowflake"`
		Name string `gorm:"size:16"`
	}
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			dbs, reg := b.Open(t), shardtest.Registry(t)
			repo, err := shardgorm.New([]*gorm.DB{openGorm(t, dbs[0], reg), openGorm(t, dbs[1], reg)}, shardtest.CourseRouter(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := repo.Migrate(ctx, &Spaced{}); err != nil {
				t.Fatal(err)
			}
			rows := []Spaced{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
			for range 2 { // the second reads back which rows are stored
				if err := repo.Create(ctx, rows); err != nil {
					t.Fatal(err)
				}
			}
			var n int64
			err = repo.ForEach(ctx, func(_ sharding.Shard, db *gorm.DB) error {
				var c int64
				err := db.Model(&Spaced{}).Count(&c).Error
				n += c
				return err
			})
			if err != nil || n != int64(len(rows)) {
				t.Errorf("%d rows stored, %v; want %d", n, err, len(rows))
			}
		})
	}
}

// A bound session refuses writes reaching another table through an alias,
// another schema or database, a clause naming the table, or a routing
// column set to a key of another shard; a key of its own shard is taken.
func TestGormBoundEscapes(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			repo, dbs := gormRepo(t, b)
			rows := make([]Course, 8)
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			db, s, err := repo.DB(4) // id 4 → m0.course_1
			if err != nil {
				t.Fatal(err)
			}
			var here, there int64 // a row of m0.course_1, and one of m0.course_2
			for _, c := range rows {
				switch got, _ := shardtest.CourseRouter(t).Route(c.ID); {
				case got == s:
					here = c.ID
				case got.Database == 0:
					there = c.ID
				}
			}
			other := dbs[1].Migrator().CurrentDatabase() + ".course_1"
			if b.Name == "postgres" {
				other = "public.course_1" // another schema's name of the table: refused all the same
			}
			for name, w := range map[string]func() *gorm.DB{
				"an alias":         func() *gorm.DB { return db.Table("course_2 AS course_1").Where("1 = 1").Update("name", "x") },
				"another database": func() *gorm.DB { return db.Table(other).Where("1 = 1").Update("name", "x") },
				"an INSERT clause": func() *gorm.DB {
					return db.Clauses(clause.Insert{Table: clause.Table{Name: "course_2"}}).Create(&Course{ID: here + 4})
				},
				"an UPDATE clause": func() *gorm.DB {
					return db.Clauses(clause.Update{Table: clause.Table{Name: "course_2"}}).Where("1 = 1").Update("name", "x")
				},
				"a FROM of a delete": func() *gorm.DB {
					return db.Clauses(clause.From{Tables: []clause.Table{{Name: "course_2"}}}).Where("1 = 1").Delete(&Course{})
				},
				"id to another shard": func() *gorm.DB { return db.Where("id = ?", here).Update("id", there) },
				"ID by map":           func() *gorm.DB { return db.Model(&Course{}).Where("id = ?", here).Updates(map[string]any{"ID": there}) },
				"ID by struct":        func() *gorm.DB { return db.Model(&Course{}).Where("id = ?", here).Updates(Course{ID: there + 8}) },
				"id to an expression": func() *gorm.DB { return db.Where("id = ?", here).Update("id", gorm.Expr("id + 1")) },
			} {
				if err := w().Error; !errors.Is(err, sharding.ErrWrongShard) {
					t.Errorf("%s: err = %v, want sharding.ErrWrongShard", name, err)
				}
			}
			for _, c := range rows {
				var got Course
				if err := repo.Find(ctx, c.ID, &got); err != nil || got.Name != "" {
					t.Errorf("row %d after the refused writes: %+v, %v", c.ID, got, err)
				}
			}
			if res := db.Where("id = ?", here).Update("id", here+4); res.Error != nil || res.RowsAffected != 1 {
				t.Errorf("moving id %d within its shard: %d rows, %v", here, res.RowsAffected, res.Error)
			}
		})
	}
}

// A bound session's upsert (ON CONFLICT ... DO UPDATE, ON DUPLICATE KEY
// UPDATE) and update may set a routing column only to a value that keeps
// the row in the session's shard and, with owner-keyed IDs, with its
// owner's residue.
func TestGormBoundUpserts(t *testing.T) {
	const residues = 12
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			dbs := b.Open(t)
			reg := shardtest.OwnerRegistry(t)
			gdbs := []*gorm.DB{openGorm(t, dbs[0], reg), openGorm(t, dbs[1], reg)}
			r := shardtest.CourseRouter(t)
			repo, err := shardgorm.New(gdbs, r, sharding.Settings{ShardKey: "UserID", OwnerResidues: residues})
			if err != nil {
				t.Fatal(err)
			}
			if err := repo.Migrate(ctx, &Course{}); err != nil {
				t.Fatal(err)
			}
			seed := []Course{{UserID: 4}, {UserID: 4}, {UserID: 4}}
			if err := repo.Create(ctx, seed); err != nil {
				t.Fatal(err)
			}
			db, s, err := repo.DB(4) // user 4 → m0.course_1; 8 and 16 too, 16 alone with 4's residue mod 12
			if err != nil {
				t.Fatal(err)
			}
			other, _ := r.OwnerID(5, 999, residues)
			upsert := func(row Course, oc clause.OnConflict) error {
				oc.Columns = []clause.Column{{Name: "id"}}
				return db.Clauses(oc).Create(&row).Error
			}
			set := func(v map[string]any) clause.OnConflict { return clause.OnConflict{DoUpdates: clause.Assignments(v)} }
			for name, err := range map[string]error{
				"user of another shard":             upsert(seed[0], set(map[string]any{"user_id": 5})),
				"user of another residue":           upsert(seed[0], set(map[string]any{"user_id": 8})),
				"an ID of another shard":            upsert(seed[0], set(map[string]any{"id": other})),
				"user to an expression":             upsert(seed[0], set(map[string]any{"user_id": gorm.Expr("user_id + 1")})),
				"user to the inserted row's":        upsert(seed[0], clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"user_id"})}),
				"every column":                      upsert(seed[0], clause.OnConflict{UpdateAll: true}),
				"update of a user by SQL":           db.Where("user_id = ?", 4).Update("user_id", 16).Error,
				"update to another residue":         db.Where(map[string]any{"user_id": 4}).Update("user_id", 8).Error,
				"update of the row's residue":       db.Model(&seed[0]).Update("user_id", 8).Error,
				"a residue ORed away":               db.Where(map[string]any{"user_id": 4}).Or("id = ?", 1).Update("user_id", 16).Error,
				"a new row's ID of another residue": db.Create(&Course{ID: seed[0].ID + 4, UserID: 4}).Error,
			} {
				if !errors.Is(err, sharding.ErrWrongShard) {
					t.Errorf("%s through %s's session: err = %v, want sharding.ErrWrongShard", name, s, err)
				}
			}
			for _, c := range seed {
				var got Course
				if err := repo.Find(ctx, c.ID, &got); err == nil {
					t.Errorf("row %d after the refused writes: found by its ID as its owner, user %d", c.ID, got.UserID)
				}
			}
			var mine []Course
			if err := repo.Find(ctx, 4, &mine); err != nil || len(mine) != 3 {
				t.Errorf("Find(user 4) after the refused writes: %d rows, %v", len(mine), err)
			}
			if err := upsert(seed[0], set(map[string]any{"name": "upserted", "user_id": 16})); err != nil {
				t.Errorf("an upsert keeping the user's residue: %v", err)
			}
			if err := db.Model(&seed[1]).Update("user_id", 16).Error; err != nil {
				t.Errorf("an update of the row's user keeping its residue: %v", err)
			}
			if err := db.Where(map[string]any{"user_id": 4}).Update("user_id", 16).Error; err != nil {
				t.Errorf("an update of user 4's rows keeping its residue: %v", err)
			}
			if err := repo.Find(ctx, 16, &mine); err != nil || len(mine) != 3 || mine[0].Name != "upserted" {
				t.Errorf("Find(user 16) = %+v, %v; want the 3 rows, the first upserted", mine, err)
			}

			plain, _ := gormRepo(t, b, sharding.Settings{ShardKey: "UserID"})
			rows := []Course{{UserID: 4}}
			if err := plain.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			pdb, _, err := plain.DB(4)
			if err != nil {
				t.Fatal(err)
			}
			row := rows[0]
			if err := pdb.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, UpdateAll: true}).Create(&row).Error; err != nil {
				t.Errorf("an upsert of every column, the user the inserted row's: %v", err)
			}
			err = pdb.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.Assignments(map[string]any{"user_id": 5})}).Create(&row).Error
			if !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("an upsert moving the row to user 5 of another shard: err = %v, want sharding.ErrWrongShard", err)
			}
		})
	}
}
