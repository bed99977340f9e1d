package shardtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
	"github.com/idforge/idforge/tests/faultproxy"
	"github.com/idforge/idforge/tests/testdb"
)

// Repository is the method set the GORM and sqlx repositories share, DB
// being *gorm.DB or *sqlx.DB: each test file asserts its repository
// implements it, so the verbs cannot drift apart.
type Repository[DB any] interface {
	Create(ctx context.Context, value any) error
	Find(ctx context.Context, key int64, dest any) error
	Get(ctx context.Context, ids []int64, dest any) error
	Update(ctx context.Context, q sharding.Query, model any, set map[string]any) (int64, error)
	Delete(ctx context.Context, q sharding.Query, model any) (int64, error)
	Page(ctx context.Context, q sharding.Query, dest any) error
	Count(ctx context.Context, q sharding.Query, model any) (int64, error)
	DB(key int64) (*DB, sharding.Shard, error)
	ForEach(ctx context.Context, fn func(s sharding.Shard, db *DB) error) error
	Exec(ctx context.Context, query string, args ...any) error
}

// TxRepository is what the contract uses of the repository both
// repositories' In returns: the repository inside a caller's transaction
// on one shard.
type TxRepository interface {
	Create(ctx context.Context, value any) error
	Find(ctx context.Context, key int64, dest any) error
	Get(ctx context.Context, ids []int64, dest any) error
	Update(ctx context.Context, q sharding.Query, model any, set map[string]any) (int64, error)
	Delete(ctx context.Context, q sharding.Query, model any) (int64, error)
	Page(ctx context.Context, q sharding.Query, dest any) error
	Count(ctx context.Context, q sharding.Query, model any) (int64, error)
}

// Harness is what the contract needs from one ORM's tests. Row is that
// ORM's course struct: ID (the idgen-tagged key), Name and UserID.
type Harness[DB any, Row any] struct {
	// Open opens one database; GORM's registers the plugin drawing from
	// reg.
	Open func(t *testing.T, d testdb.DB, reg engine.Provider) *DB
	// New returns a repository routing with r over dbs, drawing from reg;
	// it creates no table.
	New func(r *sharding.Router, reg engine.Provider, dbs []*DB, s ...sharding.Settings) (Repository[DB], error)
	// Migrate creates the course table of every shard that lacks one.
	Migrate func(ctx context.Context, repo Repository[DB]) error
	// In begins a transaction on db (the database of key's shard, or
	// another to see it refused) and returns the repository inside it
	// for key and the end of the transaction: commit or roll back.
	In func(ctx context.Context, repo Repository[DB], key int64, db *DB) (TxRepository, func(commit bool) error, error)
	// Row makes a course row without an ID.
	Row func(name string, user int64) Row
	// WithID returns r with its ID set.
	WithID func(r Row, id int64) Row
	// ID and User read a row's ID and user, Name its name.
	ID, User func(r *Row) int64
	Name     func(r *Row) string
	// Same reports whether a row read back matches the one inserted.
	Same func(got, want Row) bool
	// Rows reads all rows of shard s.
	Rows func(ctx context.Context, s sharding.Shard, db *DB) ([]Row, error)
	// Exec runs a statement of the test's own on db.
	Exec func(db *DB, query string) error
	// Columns counts the columns a row binds in an INSERT.
	Columns int
}

// Dialect is the dialect of backend b's databases, as the repositories
// name it.
func Dialect(b Backend) string {
	return map[string]string{"sqlite": "sqlite", "mariadb": "mysql", "postgres": "postgres"}[b.Name]
}

// course returns a repository over the course router on two new databases
// of b, its tables created, and the databases.
func (h Harness[DB, Row]) course(t *testing.T, b Backend, s ...sharding.Settings) (Repository[DB], [2]testdb.DB) {
	t.Helper()
	return h.courseOn(t, b, Registry(t), s...)
}

// courseOn is course drawing IDs from reg.
func (h Harness[DB, Row]) courseOn(t *testing.T, b Backend, reg engine.Provider, s ...sharding.Settings) (Repository[DB], [2]testdb.DB) {
	t.Helper()
	dbs := b.Open(t)
	repo, err := h.New(CourseRouter(t), reg, []*DB{h.Open(t, dbs[0], reg), h.Open(t, dbs[1], reg)}, s...)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Migrate(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	return repo, dbs
}

// ReadBack reads every shard, checks each row is where its ID routes and
// was found once, and returns the rows by ID and the count per shard.
func (h Harness[DB, Row]) ReadBack(t *testing.T, r *sharding.Router, repo Repository[DB]) (map[int64]Row, map[string]int) {
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
		Placed(t, r, s, ids, seen)
		counts[s.String()] = len(got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, counts
}

// allOnce checks every row of want is stored once, where it routes, and
// nothing else is.
func (h Harness[DB, Row]) allOnce(t *testing.T, repo Repository[DB], want []Row) {
	t.Helper()
	h.allOnceIn(t, CourseRouter(t), repo, want)
}

// allOnceIn is allOnce for a repository routing with r.
func (h Harness[DB, Row]) allOnceIn(t *testing.T, r *sharding.Router, repo Repository[DB], want []Row) {
	t.Helper()
	found, _ := h.ReadBack(t, r, repo)
	if len(found) != len(want) {
		t.Errorf("%d rows stored, want %d", len(found), len(want))
	}
	for i := range want {
		if id := h.ID(&want[i]); id == 0 || !h.Same(found[id], want[i]) {
			t.Errorf("row %d (id %d): stored %+v, want %+v", i, id, found[id], want[i])
		}
	}
}

// Run runs the contract on every backend.
func (h Harness[DB, Row]) Run(t *testing.T) {
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Run("BatchSplitting", func(t *testing.T) { h.batchSplitting(t, b) })
			t.Run("ShardKey", func(t *testing.T) { h.shardKey(t, b) })
			t.Run("ShardErrorRetry", func(t *testing.T) { h.shardErrorRetry(t, b) })
			t.Run("PartAtomic", func(t *testing.T) { h.partAtomic(t, b) })
			t.Run("KilledMidBatch", func(t *testing.T) { h.killedMidBatch(t, b) })
			t.Run("CancelledRow", func(t *testing.T) { h.cancelledRow(t, b) })
			t.Run("CutAtCommit", func(t *testing.T) { h.cutAtCommit(t, b) })
			t.Run("RefusedAtCommit", func(t *testing.T) { h.refusedAtCommit(t, b) })
			t.Run("KilledPool", func(t *testing.T) { h.killedPool(t, b) })
			t.Run("Transaction", func(t *testing.T) { h.transaction(t, b) })
			t.Run("Quoting", func(t *testing.T) { h.quoting(t, b) })
			t.Run("BatchCap", func(t *testing.T) { h.batchCap(t, b) })
			t.Run("Config", func(t *testing.T) { h.config(t, b) })
			t.Run("Get", func(t *testing.T) { h.get(t, b) })
			t.Run("FindOwner", func(t *testing.T) { h.findOwner(t, b) })
			t.Run("OwnerIDs", func(t *testing.T) { h.ownerIDs(t, b) })
			t.Run("UpdateDelete", func(t *testing.T) { h.updateDelete(t, b) })
			t.Run("UpdateOwners", func(t *testing.T) { h.updateOwners(t, b) })
			t.Run("Page", func(t *testing.T) { h.page(t, b) })
			t.Run("Concurrent", func(t *testing.T) { h.concurrent(t, b) })
		})
	}
}

// batchSplitting inserts a batch larger than the batch size, one row, and a
// slice of pointers; reads them all back from where they route; finds one
// and misses one.
func (h Harness[DB, Row]) batchSplitting(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b, sharding.Settings{BatchSize: 300})
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
	h.allOnce(t, repo, all)
	_, counts := h.ReadBack(t, CourseRouter(t), repo)
	// The registry's clock stands still, so the IDs carry consecutive
	// sequences: 2,500 IDs split 625 per shard under the course rule.
	for s, n := range counts {
		if n < 625 {
			t.Errorf("shard %s has %d rows, want at least 625 (%v)", s, n, counts)
		}
	}
	maxMin, p := sharding.Measure(counts)
	t.Logf("%s: %v: max/min %.3f, p %.4f", b.Name, counts, maxMin, p)

	var got Row
	if err := repo.Find(ctx, h.ID(&batch[1234]), &got); err != nil || !h.Same(got, batch[1234]) {
		t.Errorf("Find(%d) = %+v, %v; want %+v", h.ID(&batch[1234]), got, err, batch[1234])
	}
	missing := h.ID(ptrs[2]) + 1 // the clock stands still: the next ID, never issued
	if err := repo.Find(ctx, missing, &got); !errors.Is(err, sharding.ErrNotFound) {
		t.Errorf("Find(missing %d): err = %v, want sharding.ErrNotFound", missing, err)
	}
	for _, key := range []int64{-1, 0} {
		if err := repo.Find(ctx, key, &got); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Find(%d): err = %v, want engine.ErrInvalidID", key, err)
		}
	}
	if err := repo.Exec(ctx, "DELETE FROM course_1"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Exec without {table}: err = %v, want engine.ErrInvalidConfig", err)
	}
}

// shardKey routes by the user instead of the ID; a user left 0 is refused
// with a hint to set it, not to tag it.
func (h Harness[DB, Row]) shardKey(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b, sharding.Settings{ShardKey: "UserID"})
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
		want, _ := CourseRouter(t).Route(user)
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
	unset := []Row{h.Row("e", 104), h.Row("no user", 0)}
	err := repo.Create(ctx, unset)
	if !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "UserID") || strings.Contains(err.Error(), "idgen") {
		t.Errorf("a row with user 0: err = %v, want engine.ErrInvalidID naming UserID, without a hint about idgen tags", err)
	}
}

// shardErrorRetry drops the table of m1.course_1: a batch fails there with
// a ShardError naming what was written and what is pending; with the table
// back, Create with the same rows finishes the batch.
func (h Harness[DB, Row]) shardErrorRetry(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b)
	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Exec(db3, "DROP TABLE "+quote(b, s3)); err != nil {
		t.Fatal(err)
	}
	rows := h.rows(8)
	err = repo.Create(ctx, rows)
	var se *sharding.ShardError
	if !errors.As(err, &se) || len(se.Rows) != 2 || errors.Is(err, sharding.ErrOutcomeUnknown) ||
		!strings.Contains(err.Error(), "insert 2 rows: m1.course_1:") {
		t.Fatalf("Create with a missing table: err = %v, want a ShardError for m1.course_1", err)
	}
	failed, written, pending := h.parts(t, rows, se)
	if !slices.Equal(failed, []string{s3.String()}) || !slices.Equal(written, []string{"m0.course_1", "m0.course_2"}) || !slices.Equal(pending, []string{"m1.course_2"}) {
		t.Errorf("failed %v, written %v, pending %v; want m1.course_1 failed, m0's two shards written and m1.course_2 pending", failed, written, pending)
	}
	// m1.course_2's rows, stored by a Create of their own, are written
	// though their part comes after the failed one: Written lists them.
	var later []*Row
	for i := range rows {
		if !slices.Contains(se.Rows, i) && !slices.Contains(se.Written, i) {
			later = append(later, &rows[i])
		}
	}
	if err := repo.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	err = repo.Create(ctx, rows)
	if !errors.As(err, &se) || len(se.Rows) != 2 {
		t.Fatalf("Create again with the table missing: err = %v, want a ShardError for m1.course_1's 2 rows", err)
	}
	failed, written, pending = h.parts(t, rows, se)
	if !slices.Equal(failed, []string{s3.String()}) || !slices.Equal(written, []string{"m0.course_1", "m0.course_2", "m1.course_2"}) || len(pending) != 0 {
		t.Errorf("failed %v, written %v, pending %v; want m1.course_1 failed and the other three shards written", failed, written, pending)
	}
	if err := h.Migrate(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatalf("Create again with the same rows: %v", err)
	}
	h.allOnce(t, repo, rows)
}

// rows makes n course rows of user 1, named by their position.
func (h Harness[DB, Row]) rows(n int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = h.Row(fmt.Sprint("row ", i), 1)
	}
	return rows
}

// goCreate runs repo.Create(ctx, value) in a goroutine and sends its error.
func goCreate[DB any](ctx context.Context, repo Repository[DB], value any) <-chan error {
	done := make(chan error, 1)
	go func() { done <- repo.Create(ctx, value) }()
	return done
}

// parts returns the shards of a ShardError's failed rows, of its written
// rows, and of the rest (the parts never tried), by name.
func (h Harness[DB, Row]) parts(t *testing.T, rows []Row, se *sharding.ShardError) (failed, written, pending []string) {
	r := CourseRouter(t)
	names := func(positions []int) []string {
		var out []string
		for _, i := range positions {
			s, err := r.Route(h.ID(&rows[i]))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s.String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var rest []int
	for i := range rows {
		if !slices.Contains(se.Rows, i) && !slices.Contains(se.Written, i) {
			rest = append(rest, i)
		}
	}
	return names(se.Rows), names(se.Written), names(rest)
}

// quote is s's table quoted for b.
func quote(b Backend, s sharding.Shard) string { return repo.Quote(Dialect(b), s.TableName) }

// poison makes inserts of a row named "bad" into shard s fail.
func (h Harness[DB, Row]) poison(t *testing.T, b Backend, db *DB, s sharding.Shard) {
	t.Helper()
	q := "ALTER TABLE " + quote(b, s) + " ADD CONSTRAINT no_bad CHECK (name <> 'bad')"
	if b.Name == "sqlite" { // no ALTER TABLE ADD CONSTRAINT
		q = "CREATE TRIGGER no_bad BEFORE INSERT ON " + quote(b, s) + " WHEN NEW.name = 'bad' BEGIN SELECT RAISE(ABORT, 'bad name'); END"
	}
	if err := h.Exec(db, q); err != nil {
		t.Fatal(err)
	}
}

// partAtomic: a shard's part of four rows goes in two statements (batch
// size 2) and its fourth row breaks a CHECK: the part is rolled back
// whole, on GORM with SkipDefaultTransaction too (the GORM harness opens
// its databases so). Renamed, the row goes in on a retry with the same
// rows.
func (h Harness[DB, Row]) partAtomic(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b, sharding.Settings{BatchSize: 2})
	db0, s0, err := repo.DB(4) // id 4 → m0.course_1
	if err != nil {
		t.Fatal(err)
	}
	h.poison(t, b, db0, s0)
	probe := h.Row("probe", 1)
	if err := repo.Create(ctx, &probe); err != nil {
		t.Fatal(err)
	}
	// The registry's clock stands still: the batch's IDs follow the probe's.
	rows := make([]Row, 16)
	var inFirst []int
	for i := range rows {
		rows[i] = h.Row(fmt.Sprint("row ", i), 1)
		if s, _ := CourseRouter(t).Route(h.ID(&probe) + 1 + int64(i)); s == s0 {
			inFirst = append(inFirst, i)
		}
	}
	rows[inFirst[3]] = h.Row("bad", 1)
	err = repo.Create(ctx, rows)
	for i := range rows {
		if h.ID(&rows[i]) != h.ID(&probe)+1+int64(i) {
			t.Fatalf("row %d has ID %d, want %d: the test needs consecutive IDs", i, h.ID(&rows[i]), h.ID(&probe)+1+int64(i))
		}
	}
	var se *sharding.ShardError
	var pending []string
	if errors.As(err, &se) {
		_, _, pending = h.parts(t, rows, se)
	}
	if se == nil || !strings.Contains(err.Error(), s0.String()+":") || !slices.Equal(se.Rows, inFirst) || len(se.Written) != 0 || len(pending) != 3 ||
		!strings.Contains(err.Error(), "statement 2 of 2") {
		t.Fatalf("Create with a bad row in the second statement of %s: err = %v", s0, err)
	}
	_, counts := h.ReadBack(t, CourseRouter(t), repo)
	if counts[s0.String()] != 1 { // the probe
		t.Errorf("%s holds %d rows after its part failed, want only the probe: the part was not atomic", s0, counts[s0.String()]-1)
	}
	rows[inFirst[3]] = h.Row("good", 1) // fixed, drawing a new ID
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	h.allOnce(t, repo, append(rows, probe))

	// A retry whose failed part holds rows an earlier Create stored lists
	// them as written, not as failed, and so the stored rows of the parts
	// after it, never tried.
	var next int64 // the clock stands still: the next ID follows the largest drawn
	for i := range rows {
		next = max(next, h.ID(&rows[i])+1)
	}
	more := slices.Clone(rows)
	for i := range int64(4) {
		name := "new"
		if s, _ := CourseRouter(t).Route(next + i); s == s0 {
			name = "bad"
		}
		more = append(more, h.Row(name, 1))
	}
	err = repo.Create(ctx, more)
	stored := make([]int, len(rows)) // in s0, the first part, and after it
	for i := range stored {
		stored[i] = i
	}
	var failed []int
	for i := len(rows); i < len(more); i++ {
		if s, _ := CourseRouter(t).Route(h.ID(&more[i])); s == s0 {
			failed = append(failed, i)
		}
	}
	if se = nil; !errors.As(err, &se) || !slices.Equal(se.Written, stored) || !slices.Equal(se.Rows, failed) {
		t.Fatalf("a retry failing in %s, the rows %v stored: err = %v, want Written %v and Rows %v", s0, stored, err, stored, failed)
	}
}

// killedMidBatch kills the connection writing m1.course_1's part while it
// waits on a lock: m0's parts are committed, m1's are not, the error says
// so, and Create with the same rows finishes the batch, each row once.
func (h Harness[DB, Row]) killedMidBatch(t *testing.T, b Backend) {
	if b.Name == "sqlite" {
		t.Skip("SQLite has no connection to kill")
	}
	ctx := context.Background()
	repo, dbs := h.course(t, b)
	_, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	lock := Lock(t, dbs[1], quote(b, s3))
	rows := h.rows(16)
	done := goCreate(ctx, repo, rows)
	lock.Kill(t, lock.Waiting(t, "INSERT"))
	err = <-done
	lock.Unlock(t)
	var se *sharding.ShardError
	var failed, written, pending []string
	if errors.As(err, &se) {
		failed, written, pending = h.parts(t, rows, se)
	}
	if se == nil || !slices.Equal(failed, []string{s3.String()}) || errors.Is(err, sharding.ErrOutcomeUnknown) ||
		!slices.Equal(written, []string{"m0.course_1", "m0.course_2"}) ||
		!slices.Equal(pending, []string{"m1.course_2"}) {
		t.Fatalf("Create with m1.course_1's connection killed: err = %v, want a ShardError for m1.course_1, m0 written", err)
	}
	h.retry(t, repo, rows, map[string]int{"m0.course_1": 4, "m0.course_2": 4, "m1.course_1": 0, "m1.course_2": 0})
}

// cancelledRow cancels a single row's Create while its INSERT waits on a
// lock: the row is written in a transaction, so once the lock is gone and
// the server has finished the statement the row is not there, and the
// error did not claim it might be. Create again stores it once.
func (h Harness[DB, Row]) cancelledRow(t *testing.T, b Backend) {
	if b.Name == "sqlite" {
		t.Skip("SQLite's lock is the whole file")
	}
	ctx := context.Background()
	repo, dbs := h.course(t, b)
	probe := h.Row("probe", 1)
	if err := repo.Create(ctx, &probe); err != nil {
		t.Fatal(err)
	}
	next := h.ID(&probe) + 1 // the registry's clock stands still
	s, err := CourseRouter(t).Route(next)
	if err != nil {
		t.Fatal(err)
	}
	lock := Lock(t, dbs[s.Database], quote(b, s))
	row := h.Row("late", 1)
	cctx, cancel := context.WithCancel(ctx)
	done := goCreate(cctx, repo, &row)
	session := lock.Waiting(t, "INSERT")
	cancel()
	err = <-done
	lock.Unlock(t)
	lock.Idle(t, session)
	if h.ID(&row) != next {
		t.Fatalf("the row has ID %d, want %d", h.ID(&row), next)
	}
	var got Row
	ferr := repo.Find(ctx, next, &got)
	switch {
	case err == nil:
		t.Fatal("Create returned nil though cancelled while it waited")
	case ferr == nil && !errors.Is(err, sharding.ErrOutcomeUnknown):
		t.Fatalf("the row is stored, yet Create failed (%v) without saying the outcome is unknown", err)
	case !errors.Is(ferr, sharding.ErrNotFound):
		t.Fatalf("Find after the cancelled Create: %v, want sharding.ErrNotFound (rolled back)", ferr)
	case errors.Is(err, sharding.ErrOutcomeUnknown):
		t.Errorf("a statement cancelled before COMMIT is a rollback, not an unknown outcome: %v", err)
	}
	if err := repo.Create(ctx, &row); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	h.allOnce(t, repo, []Row{probe, row})
}

// transaction runs Create and Find in a transaction of the caller's: they
// roll back and commit with it; rows and keys of another shard are
// refused; a failed Create rolls back to its savepoint and leaves the
// transaction usable.
func (h Harness[DB, Row]) transaction(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b)
	var in, out []int64 // IDs of m1.course_1 and of another shard
	for id := int64(1) << 40; len(in) < 4 || len(out) < 1; id++ {
		s, _ := CourseRouter(t).Route(id)
		if s.Database == 1 && s.TableName == "course_1" {
			in = append(in, id)
		} else if s.Database == 0 {
			out = append(out, id)
		}
	}
	rows := []Row{h.WithID(h.Row("a", 1), in[0]), h.WithID(h.Row("b", 1), in[1])}
	var got Row

	tx, end, err := h.in(ctx, t, repo, in[0], in[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := tx.Find(ctx, in[0], &got); err != nil || !h.Same(got, rows[0]) {
		t.Errorf("Find in the transaction = %+v, %v", got, err)
	}
	wrong := []Row{h.WithID(h.Row("c", 1), in[2]), h.WithID(h.Row("elsewhere", 1), out[0])}
	if err := tx.Create(ctx, wrong); !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("Create of a row of another shard in the transaction: err = %v, want sharding.ErrWrongShard", err)
	}
	if err := tx.Find(ctx, out[0], &got); !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("Find of a key of another shard in the transaction: err = %v, want sharding.ErrWrongShard", err)
	}
	var many []Row
	if err := tx.Get(ctx, []int64{in[1], in[0]}, &many); err != nil || len(many) != 2 || !h.Same(many[0], rows[1]) {
		t.Errorf("Get in the transaction = %+v, %v; want rows b and a", many, err)
	}
	if err := tx.Get(ctx, []int64{in[0], out[0]}, &many); !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("Get of an ID of another shard in the transaction: err = %v, want sharding.ErrWrongShard", err)
	}
	if n, err := tx.Update(ctx, sharding.Query{IDs: []int64{in[0]}}, new(Row), map[string]any{"name": "a2"}); err != nil || n != 1 {
		t.Errorf("Update in the transaction: %d rows, %v", n, err)
	}
	if _, err := tx.Update(ctx, sharding.Query{IDs: []int64{out[0]}}, new(Row), map[string]any{"name": "x"}); !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("Update of an ID of another shard in the transaction: err = %v, want sharding.ErrWrongShard", err)
	}
	if n, err := tx.Count(ctx, sharding.Query{}, new(Row)); err != nil || n != 2 {
		t.Errorf("Count in the transaction: %d, %v; want its shard's 2 rows", n, err)
	}
	if err := tx.Page(ctx, sharding.Query{Order: "id DESC"}, &many); err != nil || len(many) != 2 || !h.Same(many[0], h.WithID(rows[1], in[1])) {
		t.Errorf("Page in the transaction = %+v, %v; want its shard's 2 rows, b first", many, err)
	}
	if n, err := tx.Delete(ctx, sharding.Query{IDs: []int64{in[1]}}, new(Row)); err != nil || n != 1 {
		t.Errorf("Delete in the transaction: %d rows, %v", n, err)
	}
	if err := end(false); err != nil {
		t.Fatal(err)
	}
	if err := repo.Find(ctx, in[0], &got); !errors.Is(err, sharding.ErrNotFound) {
		t.Errorf("Find after the rollback: err = %v, want sharding.ErrNotFound", err)
	}
	h.allOnce(t, repo, nil) // Create joined the transaction: nothing survives its rollback

	// A transaction of m0 given for a key of m1 is refused.
	_, end, err = h.in(ctx, t, repo, in[0], out[0])
	if end != nil {
		_ = end(false)
	}
	if !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("In(key of m1, transaction of m0): err = %v, want sharding.ErrWrongShard", err)
	}

	tx, end, err = h.in(ctx, t, repo, in[0], in[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	twice := []Row{h.WithID(h.Row("c", 1), in[2]), h.WithID(h.Row("c again", 1), in[2])}
	if err := tx.Create(ctx, twice); err == nil {
		t.Fatal("Create of two rows with one key: no error")
	}
	last := h.WithID(h.Row("d", 1), in[3])
	if err := tx.Create(ctx, &last); err != nil {
		t.Fatalf("Create after a failed one in the same transaction: %v", err)
	}
	if err := end(true); err != nil {
		t.Fatal(err)
	}
	h.allOnce(t, repo, append(rows, last))
}

// in is h.In for key with a transaction begun on the database of on's
// shard.
func (h Harness[DB, Row]) in(ctx context.Context, t *testing.T, repo Repository[DB], key, on int64) (TxRepository, func(bool) error, error) {
	t.Helper()
	db, _, err := repo.DB(on)
	if err != nil {
		t.Fatal(err)
	}
	return h.In(ctx, repo, key, db)
}

// quoting runs the verbs over tables whose names need quoting: digits
// only, a keyword, upper case (which PostgreSQL folds when unquoted).
func (h Harness[DB, Row]) quoting(t *testing.T, b Backend) {
	for _, pattern := range []string{"{1..2}", "order", "Course_{1..2}"} {
		t.Run(strings.Trim(strings.ReplaceAll(pattern, "{1..2}", "N"), "_"), func(t *testing.T) {
			ctx := context.Background()
			r, err := sharding.NewMod(sharding.Mod{Databases: "m{0..1}", Tables: pattern})
			if err != nil {
				t.Fatal(err)
			}
			dbs, reg := b.Open(t), Registry(t)
			repo, err := h.New(r, reg, []*DB{h.Open(t, dbs[0], reg), h.Open(t, dbs[1], reg)})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Migrate(ctx, repo); err != nil {
				t.Fatal(err)
			}
			rows := h.rows(8)
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if err := repo.Create(ctx, rows); err != nil { // stored: read back and skipped
				t.Fatal(err)
			}
			h.allOnceIn(t, r, repo, rows)
			var got Row
			if err := repo.Find(ctx, h.ID(&rows[5]), &got); err != nil || !h.Same(got, rows[5]) {
				t.Errorf("Find = %+v, %v", got, err)
			}
			if err := repo.Exec(ctx, "DELETE FROM {table} WHERE user_id = ?", 1); err != nil {
				t.Fatal(err)
			}
			h.allOnceIn(t, r, repo, nil)
		})
	}
}

// batchCap inserts one shard's part with a batch size of 30,000: both
// repositories cut the statements at the database's placeholder limit.
func (h Harness[DB, Row]) batchCap(t *testing.T, b Backend) {
	ctx := context.Background()
	r, err := sharding.NewMod(sharding.Mod{Tables: "course"})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]Row, repo.Placeholders(Dialect(b))/h.Columns+1)
	for i := range rows {
		rows[i] = h.Row("r", 1)
	}
	reg := Registry(t)
	repo, err := h.New(r, reg, []*DB{h.Open(t, b.Open(t)[0], reg)}, sharding.Settings{BatchSize: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Migrate(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatalf("%d rows of %d columns with a batch size of 30,000: %v", len(rows), h.Columns, err)
	}
	if _, counts := h.ReadBack(t, r, repo); counts["course"] != len(rows) {
		t.Errorf("%v rows stored, want %d", counts, len(rows))
	}
}

// config: a typed-nil router, a database given twice, and an interval
// router (one database) given two are refused, naming what is wrong.
func (h Harness[DB, Row]) config(t *testing.T, b Backend) {
	ctx := context.Background()
	dbs, reg := b.Open(t), Registry(t)
	m0, m1 := h.Open(t, dbs[0], reg), h.Open(t, dbs[1], reg)
	open, err := sharding.NewInterval(sharding.Interval{Layout: snowflake.Default, Table: "course_{200601}"})
	if err != nil {
		t.Fatal(err)
	}
	type testCase struct {
		r    *sharding.Router
		dbs  []*DB
		s    []sharding.Settings
		says string
	}
	cases := map[string]testCase{
		"zero router":       {&sharding.Router{}, []*DB{m0}, nil, "zero Router"},
		"nil router":        {nil, []*DB{m0, m1}, nil, "router is nil"},
		"two settings":      {CourseRouter(t), []*DB{m0, m1}, []sharding.Settings{{}, {}}, "at most one"},
		"a database twice":  {CourseRouter(t), []*DB{m0, m0}, nil, "give each database once"},
		"two pools of one":  {CourseRouter(t), []*DB{m0, h.Open(t, dbs[0], reg)}, nil, "are one database"},
		"one db for two":    {CourseRouter(t), []*DB{m0}, nil, "uses 2 databases, 1 were given"},
		"nil db":            {CourseRouter(t), []*DB{m0, nil}, nil, "database 1 is nil"},
		"interval over two": {open, []*DB{m0, m1}, nil, "interval router uses 1 database"},
		"batch size -1":     {CourseRouter(t), []*DB{m0, m1}, []sharding.Settings{{BatchSize: -1}}, "BatchSize"},
	}
	if socket, ok := Socket(t, dbs[0]); ok {
		cases["over TCP and a socket"] = testCase{CourseRouter(t), []*DB{m0, h.Open(t, socket, reg)}, nil, "are one database"}
	}
	for name, c := range cases {
		if _, err := h.New(c.r, reg, c.dbs, c.s...); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want engine.ErrInvalidConfig saying %q", name, err, c.says)
		}
	}
	repo, err := h.New(open, reg, []*DB{m0})
	if err != nil {
		t.Fatal(err)
	}
	var got Row
	if err := repo.Find(ctx, 0, &got); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Find(0) behind an open interval router: err = %v, want engine.ErrInvalidID", err)
	}

	// A nil context is refused before it reaches a driver, which would
	// panic and leave the pool's connection in use.
	course, _ := h.course(t, b)
	var none context.Context
	Refuses[DB, Row](t, "a nil context", course, none, "nil context")
	rows := h.rows(8)
	if err := course.Create(ctx, rows); err != nil {
		t.Fatalf("Create after the nil contexts: %v", err)
	}
	h.allOnce(t, course, rows)
	var page []Row
	var n int
	for name, err := range map[string]error{
		"Find into nil":    course.Find(ctx, 1, nil),
		"Find into an int": course.Find(ctx, 1, &n),
		"Find into []int":  course.Find(ctx, 1, &[]int{}),
		"Count of a value": func() error { _, err := course.Count(ctx, sharding.Query{}, *new(Row)); return err }(),
		"Update of a value": func() error {
			_, err := course.Update(ctx, sharding.Query{Key: 1}, *new(Row), map[string]any{"name": "x"})
			return err
		}(),
		"a blank Query.Order": course.Page(ctx, sharding.Query{Order: " "}, &page),
	} {
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "want") {
			t.Errorf("%s: err = %v, want engine.ErrInvalidConfig saying what is wanted", name, err)
		}
	}
}

// cutAtCommit cuts m1's connections while the COMMIT of m1.course_1's
// part waits in a deferred trigger, then lets the COMMIT finish: the part
// is stored though Create failed, and the error says the outcome is
// unknown. Create again with the same rows finishes the batch, each row
// once.
func (h Harness[DB, Row]) cutAtCommit(t *testing.T, b Backend) {
	if b.Name != "postgres" {
		t.Skip("a COMMIT is held in a PostgreSQL deferred trigger")
	}
	ctx := context.Background()
	dbs, reg := b.Open(t), Registry(t)
	u, err := url.Parse(dbs[1].DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	viaProxy := dbs[1]
	u.Host = proxy.Addr()
	viaProxy.DSN = u.String()
	repo, err := h.New(CourseRouter(t), reg, []*DB{h.Open(t, dbs[0], reg), h.Open(t, viaProxy, reg)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Migrate(ctx, repo); err != nil {
		t.Fatal(err)
	}
	_, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	hold := HoldCommits(t, dbs[1], quote(b, s3))
	rows := h.rows(16)
	done := goCreate(ctx, repo, rows)
	session := hold.Waiting(t, "COMMIT")
	proxy.Cut()
	err = <-done
	hold.Unlock(t)
	hold.Idle(t, session)
	proxy.Restore()
	var se *sharding.ShardError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), s3.String()+":") || !errors.Is(err, sharding.ErrOutcomeUnknown) {
		t.Fatalf("Create with the connection cut during COMMIT: err = %v, want a ShardError for %s wrapping sharding.ErrOutcomeUnknown", err, s3)
	}
	// The held COMMIT went through.
	h.retry(t, repo, rows, map[string]int{"m0.course_1": 4, "m0.course_2": 4, "m1.course_1": 4, "m1.course_2": 0})
}

// retry checks the rows per shard a failed Create of rows left, then that
// Create again with the same rows stores every row once.
func (h Harness[DB, Row]) retry(t *testing.T, repo Repository[DB], rows []Row, left map[string]int) {
	t.Helper()
	if _, counts := h.ReadBack(t, CourseRouter(t), repo); !maps.Equal(counts, left) {
		t.Errorf("rows per shard after the failure = %v, want %v", counts, left)
	}
	if err := repo.Create(context.Background(), rows); err != nil {
		t.Fatalf("Create again with the same rows: %v", err)
	}
	h.allOnce(t, repo, rows)
}

// killedPool ends every pooled connection of both databases from the
// server's side: the next Create finds its connections dead at BEGIN,
// where nothing ran, begins again on a fresh one and succeeds.
func (h Harness[DB, Row]) killedPool(t *testing.T, b Backend) {
	if b.Name == "sqlite" {
		t.Skip("SQLite has no connection to kill")
	}
	ctx := context.Background()
	repo, dbs := h.course(t, b)
	rows := h.rows(8)
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, d := range dbs {
		KillOthers(t, d)
	}
	more := h.rows(8)
	if err := repo.Create(ctx, more); err != nil {
		t.Fatalf("Create after the server ended the pooled connections: %v", err)
	}
	h.allOnce(t, repo, append(rows, more...))
}

// refusedAtCommit makes the COMMIT of m1.course_1's part fail on a
// deferred unique constraint: the server refused it, so the part was
// rolled back and the error says so, not that the outcome is unknown.
func (h Harness[DB, Row]) refusedAtCommit(t *testing.T, b Backend) {
	if b.Name != "postgres" {
		t.Skip("a constraint checked at COMMIT is PostgreSQL's")
	}
	ctx := context.Background()
	repo, _ := h.course(t, b)
	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Exec(db3, "ALTER TABLE "+quote(b, s3)+" ADD CONSTRAINT one_name UNIQUE (name) DEFERRABLE INITIALLY DEFERRED"); err != nil {
		t.Fatal(err)
	}
	rows := h.rows(16)
	for i := range rows {
		rows[i] = h.Row("same", 1)
	}
	err = repo.Create(ctx, rows)
	var se *sharding.ShardError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), s3.String()+":") || errors.Is(err, sharding.ErrOutcomeUnknown) ||
		!strings.Contains(err.Error(), "23505") {
		t.Fatalf("Create refused at COMMIT by a deferred unique constraint: err = %v, want a ShardError for %s with SQLSTATE 23505, not sharding.ErrOutcomeUnknown", err, s3)
	}
	want := map[string]int{"m0.course_1": 4, "m0.course_2": 4, "m1.course_1": 0, "m1.course_2": 0}
	if _, counts := h.ReadBack(t, CourseRouter(t), repo); !maps.Equal(counts, want) {
		t.Errorf("rows per shard after the refused COMMIT = %v, want %v", counts, want)
	}
}

// Refuses checks that every method of repo taking a context, called with
// ctx, returns an error wrapping engine.ErrInvalidConfig that says says,
// and DB too when ctx is set (repo is then one New did not make): what
// names the case.
func Refuses[DB, Row any](t *testing.T, what string, repo Repository[DB], ctx context.Context, says string) {
	t.Helper()
	var rows []Row
	var n int64
	q := sharding.Query{Key: 1}
	calls := map[string]func() error{
		"Create":  func() error { return repo.Create(ctx, &[]Row{*new(Row)}) },
		"Find":    func() error { return repo.Find(ctx, 1, &rows) },
		"Get":     func() error { return repo.Get(ctx, []int64{1}, &rows) },
		"Update":  func() (err error) { n, err = repo.Update(ctx, q, new(Row), map[string]any{"name": "x"}); return err },
		"Delete":  func() (err error) { n, err = repo.Delete(ctx, q, new(Row)); return err },
		"Page":    func() error { return repo.Page(ctx, q, &rows) },
		"Count":   func() (err error) { n, err = repo.Count(ctx, q, new(Row)); return err },
		"ForEach": func() error { return repo.ForEach(ctx, func(sharding.Shard, *DB) error { return nil }) },
		"Exec":    func() error { return repo.Exec(ctx, "DELETE FROM {table} WHERE id = 1") },
	}
	if ctx != nil {
		calls["DB"] = func() error { _, _, err := repo.DB(1); return err }
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), says) || n != 0 {
			t.Errorf("%s: %s: err = %v (%d rows), want engine.ErrInvalidConfig saying %q", what, name, err, n, says)
		}
	}
}
