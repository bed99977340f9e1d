package shardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// Repository is the method set the GORM and sqlx repositories share, DB
// being *gorm.DB or *sqlx.DB: each test file asserts its repository
// implements it, so the verbs cannot drift apart.
type Repository[DB any] interface {
	Router() sharding.Router
	Create(ctx context.Context, value any) error
	Find(ctx context.Context, key int64, dest any) error
	DB(key int64) (*DB, sharding.Shard, error)
	ForEach(ctx context.Context, fn func(s sharding.Shard, db *DB) error) error
	Exec(ctx context.Context, query string, args ...any) error
}

// Harness is what the contract needs from one ORM's tests. Row is that
// ORM's course struct: ID (the idgen-tagged key), Name and UserID.
type Harness[DB any, Row any] struct {
	// New returns a repository over the course router on two databases of
	// b, with the course tables created.
	New func(t *testing.T, b Backend, opts ...sharding.Option) Repository[DB]
	// Row makes a course row without an ID.
	Row func(name string, user int64) Row
	// ID and User read a row's ID and user.
	ID, User func(r *Row) int64
	// Same reports whether a row read back matches the one inserted.
	Same func(got, want Row) bool
	// Rows reads all rows of shard s.
	Rows func(ctx context.Context, s sharding.Shard, db *DB) ([]Row, error)
	// Drop drops table from db.
	Drop func(db *DB, table string) error
}

// ReadBack reads every shard, checks each row is where its ID routes and
// was found once, and returns the rows by ID and the count per shard.
func (h Harness[DB, Row]) ReadBack(t *testing.T, repo Repository[DB]) (map[int64]Row, map[string]int) {
	t.Helper()
	ctx := context.Background()
	found := map[int64]Row{}
	counts := map[string]int{}
	seen := map[int64]bool{}
	err := repo.ForEach(ctx, func(s sharding.Shard, db *DB) error {
		got, err := h.Rows(ctx, s, db)
		if err != nil {
			return err
		}
		ids := make([]int64, len(got))
		for i := range got {
			ids[i] = h.ID(&got[i])
			found[ids[i]] = got[i]
		}
		Placed(t, repo.Router(), s, ids, seen)
		counts[s.String()] = len(got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, counts
}

// Run runs the contract on every backend.
func (h Harness[DB, Row]) Run(t *testing.T) {
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Run("BatchSplitting", func(t *testing.T) { h.batchSplitting(t, b) })
			t.Run("ShardKey", func(t *testing.T) { h.shardKey(t, b) })
			t.Run("ShardError", func(t *testing.T) { h.shardError(t, b) })
		})
	}
}

// batchSplitting inserts a batch larger than the batch size, one row, and a
// slice of pointers; reads them all back from where they route; finds one
// and misses one.
func (h Harness[DB, Row]) batchSplitting(t *testing.T, b Backend) {
	ctx := context.Background()
	repo := h.New(t, b, sharding.WithBatchSize(300))
	batch := make([]Row, 2500)
	for i := range batch {
		batch[i] = h.Row(fmt.Sprintf("course %d", i), int64(i%7))
	}
	if err := repo.Create(ctx, batch); err != nil {
		t.Fatal(err)
	}
	one := h.Row("single", 8)
	if err := repo.Create(ctx, &one); err != nil {
		t.Fatal(err)
	}
	ptrs := []*Row{new(h.Row("p0", 9)), new(h.Row("p1", 9)), new(h.Row("p2", 9))}
	if err := repo.Create(ctx, &ptrs); err != nil {
		t.Fatal(err)
	}
	all := append(batch, one, *ptrs[0], *ptrs[1], *ptrs[2])

	found, counts := h.ReadBack(t, repo)
	if len(found) != len(all) || len(counts) != 4 {
		t.Fatalf("read back %d rows from %d shards, inserted %d", len(found), len(counts), len(all))
	}
	for i := range all {
		if id := h.ID(&all[i]); id == 0 || !h.Same(found[id], all[i]) {
			t.Errorf("row %d: read back %+v, inserted %+v", id, found[id], all[i])
		}
	}
	// The registry's clock stands still, so the IDs carry consecutive
	// sequences: 2,500 IDs split 625 per shard under the course rule.
	for s, n := range counts {
		if n < 625 {
			t.Errorf("shard %s has %d rows, want at least 625 (%v)", s, n, counts)
		}
	}
	t.Logf("%s: %v", b.Name, sharding.Measure(counts))

	var got Row
	if err := repo.Find(ctx, h.ID(&batch[1234]), &got); err != nil || !h.Same(got, batch[1234]) {
		t.Errorf("Find(%d) = %+v, %v; want %+v", h.ID(&batch[1234]), got, err, batch[1234])
	}
	missing := h.ID(ptrs[2]) + 1 // the clock stands still: the next ID, never issued
	if err := repo.Find(ctx, missing, &got); !errors.Is(err, sharding.ErrNotFound) {
		t.Errorf("Find(missing %d): err = %v, want sharding.ErrNotFound", missing, err)
	}
	if err := repo.Find(ctx, -1, &got); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Find(-1): err = %v, want engine.ErrInvalidID", err)
	}
	if err := repo.Exec(ctx, "DELETE FROM course_1"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Exec without {table}: err = %v, want engine.ErrInvalidConfig", err)
	}
}

// shardKey routes by the user instead of the ID.
func (h Harness[DB, Row]) shardKey(t *testing.T, b Backend) {
	ctx := context.Background()
	repo := h.New(t, b, sharding.WithShardKey("UserID"))
	rows := []Row{h.Row("a", 100), h.Row("b", 101), h.Row("c", 102), h.Row("d", 103)}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		user := h.User(&rows[i])
		var got Row
		if err := repo.Find(ctx, user, &got); err != nil || !h.Same(got, rows[i]) {
			t.Errorf("Find(user %d) = %+v, %v; want %+v", user, got, err, rows[i])
		}
		want, _ := repo.Router().Route(user)
		found := false
		_ = repo.ForEach(ctx, func(s sharding.Shard, db *DB) error {
			got, err := h.Rows(ctx, s, db)
			for j := range got {
				if h.ID(&got[j]) == h.ID(&rows[i]) {
					found = s == want
				}
			}
			return err
		})
		if !found {
			t.Errorf("row of user %d not in %s", user, want)
		}
	}
}

// shardError drops the table of m1.course_1: a batch fails there with a
// ShardError, the shards before it are written and the one after is not.
func (h Harness[DB, Row]) shardError(t *testing.T, b Backend) {
	ctx := context.Background()
	repo := h.New(t, b)
	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Drop(db3, s3.TableName); err != nil {
		t.Fatal(err)
	}
	rows := make([]Row, 8)
	for i := range rows {
		rows[i] = h.Row(fmt.Sprint(i), 1)
	}
	err = repo.Create(ctx, rows)
	var se *sharding.ShardError
	if !errors.As(err, &se) || se.Shard != s3 || se.Rows != 2 ||
		!strings.Contains(err.Error(), "insert 2 rows into m1.course_1") {
		t.Fatalf("Create with a missing table: err = %v, want a ShardError for m1.course_1", err)
	}
	counts := map[string]int{}
	err = repo.ForEach(ctx, func(s sharding.Shard, db *DB) error {
		if s == s3 {
			return nil
		}
		got, err := h.Rows(ctx, s, db)
		counts[s.String()] = len(got)
		return err
	})
	if err != nil || counts["m0.course_1"] != 2 || counts["m0.course_2"] != 2 || counts["m1.course_2"] != 0 {
		t.Errorf("after the failure: %v, %v; want the shards before m1.course_1 written, the one after not", counts, err)
	}
}
