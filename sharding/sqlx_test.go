package sharding

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/engine"
)

type sqlxCourse struct {
	ID     int64  `db:"id" idgen:"snowflake"`
	Name   string `db:"name"`
	UserID int64  `db:"user_id"`
}

const (
	createCourse = "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, user_id BIGINT NOT NULL)"
	insertCourse = "INSERT INTO {table} (id, name, user_id) VALUES (:id, :name, :user_id)"
	selectCourse = "SELECT id, name, user_id FROM {table} WHERE id = ?"
)

func sqlxRepo(t *testing.T, b backend, opts ...Option) *Sqlx {
	t.Helper()
	var dbs []*sqlx.DB
	for _, d := range b.open(t) {
		db := sqlx.NewDb(d.Open(t), d.Driver)
		dbs = append(dbs, db)
	}
	repo, err := NewSqlx(courseRouter(t), testRegistry(t), dbs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.ExecEach(context.Background(), createCourse); err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestSqlxBatchSplitting(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			repo := sqlxRepo(t, b, WithBatchSize(300))
			batch := make([]sqlxCourse, 2500)
			for i := range batch {
				batch[i] = sqlxCourse{Name: fmt.Sprintf("course %d", i), UserID: int64(i % 7)}
			}
			if err := repo.Insert(ctx, insertCourse, batch); err != nil {
				t.Fatal(err)
			}
			one := &sqlxCourse{Name: "single"}
			if err := repo.Insert(ctx, insertCourse, one); err != nil {
				t.Fatal(err)
			}
			all := append(batch, *one)

			found := map[int64]sqlxCourse{}
			counts := map[string]int{}
			err := repo.ForEach(ctx, func(s Shard, db *sqlx.DB) error {
				var got []sqlxCourse
				if err := db.SelectContext(ctx, &got, s.Query("SELECT id, name, user_id FROM {table}")); err != nil {
					return err
				}
				for _, c := range got {
					if want, err := repo.Router().Route(c.ID); err != nil || want != s {
						t.Errorf("row %d found in %s, routes to %s (%v)", c.ID, s, want, err)
					}
					if _, dup := found[c.ID]; dup {
						t.Errorf("row %d found twice", c.ID)
					}
					found[c.ID] = c
				}
				counts[s.String()] = len(got)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != len(all) || len(counts) != 4 {
				t.Fatalf("read back %d rows from %d shards, inserted %d", len(found), len(counts), len(all))
			}
			for _, c := range all {
				if c.ID == 0 || found[c.ID] != c {
					t.Errorf("row %d: read back %+v, inserted %+v", c.ID, found[c.ID], c)
				}
			}
			for s, n := range counts {
				if n < 625 {
					t.Errorf("shard %s has %d rows, want at least 625 (%v)", s, n, counts)
				}
			}

			var got sqlxCourse
			if err := repo.Get(ctx, &got, selectCourse, batch[1234].ID); err != nil || got != batch[1234] {
				t.Errorf("Get(%d) = %+v, %v; want %+v", batch[1234].ID, got, err, batch[1234])
			}
			if err := repo.Get(ctx, &got, selectCourse, one.ID+1); !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("Get(missing): err = %v, want sql.ErrNoRows", err)
			}
		})
	}
}

func TestSqlxErrors(t *testing.T) {
	ctx := context.Background()
	repo := sqlxRepo(t, backends[0])
	if err := repo.Insert(ctx, "INSERT INTO course (id) VALUES (:id)", &sqlxCourse{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("query without {table}: err = %v", err)
	}
	type noID struct {
		Key  int64  `db:"key" idgen:"snowflake"`
		Name string `db:"name"`
	}
	if err := repo.Insert(ctx, insertCourse, &noID{}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("struct without an id column: err = %v", err)
	}
	type stringID struct {
		ID string `db:"id" idgen:"snowflake,format=radix62"`
	}
	if err := repo.Insert(ctx, insertCourse, &stringID{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("string id: err = %v", err)
	}
	if err := repo.Insert(ctx, insertCourse, sqlxCourse{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("struct by value: err = %v", err)
	}

	db, s3, _ := repo.DB(3) // id 3 → m1.course_1
	if _, err := db.Exec("DROP TABLE " + s3.TableName); err != nil {
		t.Fatal(err)
	}
	err := repo.Insert(ctx, insertCourse, make([]sqlxCourse, 8))
	var se *ShardError
	if !errors.As(err, &se) || se.Shard.String() != "m1.course_1" || se.Rows != 2 {
		t.Errorf("insert with a missing table: err = %v, want a ShardError for m1.course_1", err)
	}
	if _, err := NewSqlx(courseRouter(t), nil, []*sqlx.DB{db, db}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil registry: err = %v", err)
	}
	if _, err := NewSqlx(courseRouter(t), testRegistry(t), []*sqlx.DB{db}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("one db for two: err = %v", err)
	}
}

// WithShardKey routes by another integer column than id.
func TestSqlxShardKey(t *testing.T) {
	ctx := context.Background()
	repo := sqlxRepo(t, backends[0], WithShardKey("user_id"))
	rows := []sqlxCourse{{Name: "a", UserID: 100}, {Name: "b", UserID: 101}, {Name: "c", UserID: 102}}
	if err := repo.Insert(ctx, insertCourse, rows); err != nil {
		t.Fatal(err)
	}
	for _, c := range rows {
		var got sqlxCourse
		if err := repo.Get(ctx, &got, "SELECT id, name, user_id FROM {table} WHERE user_id = ?", c.UserID); err != nil || got != c {
			t.Errorf("Get by user %d = %+v, %v", c.UserID, got, err)
		}
	}
}
