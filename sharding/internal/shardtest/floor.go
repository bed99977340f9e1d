package shardtest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/tests/testdb"
)

// FloorHarness is what the Floor tests need from one ORM, DB being *gorm.DB
// or *sqlx.DB. Its rows are lectures, whose ID is `idgen:"chain,name=lecture"`
// and which have a Name, and invoices, whose ID is `idgen:"snowflake"` and
// whose Number is `idgen:"segment,name=invoice"`.
type FloorHarness[DB any] struct {
	// Open opens one shard database; GORM's registers the plugin drawing
	// from reg.
	Open func(t *testing.T, d testdb.DB, reg engine.Provider) *DB
	// New returns a repository routing with r over dbs, drawing from reg.
	New func(t *testing.T, r *sharding.Router, dbs []*DB, reg engine.Provider) Repository[DB]
	// Exec runs a statement on db.
	Exec func(db *DB, query string) error
	// IDs reads the column of int64 query selects.
	IDs func(db *DB, query string) ([]int64, error)
	// Migrate, if set, prepares the lecture tables as GORM's Migrate does,
	// binding the lectures' generators.
	Migrate func(ctx context.Context, repo Repository[DB]) error
	// Lectures creates n lectures and returns their IDs.
	Lectures func(ctx context.Context, repo Repository[DB], n int) ([]int64, error)
	// Invoice creates an invoice and returns its Number.
	Invoice func(ctx context.Context, repo Repository[DB]) (int64, error)
}

// Run runs the Floor tests on every backend.
func (h FloorHarness[DB]) Run(t *testing.T) {
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Run("EveryShard", func(t *testing.T) { h.everyShard(t, b) })
			t.Run("UnlistedShards", func(t *testing.T) { h.unlistedShards(t, b) })
		})
	}
}

// LectureRouter routes as [CourseRouter] over three tables per database,
// lecture_1 to lecture_3; lecture_3 never takes a row. The router lists it,
// so the Floors read it: the tests leave it uncreated.
func LectureRouter(t testing.TB) *sharding.Router {
	t.Helper()
	r, err := sharding.NewMod(sharding.Mod{
		Databases: "m{0..1}", Tables: "lecture_{1..3}",
		TableRule: "(id+1)%4/2+1",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const createLecture = "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL)"

// everyShard writes lectures through a repository whose registry draws from
// a store, wipes the store, and writes more through a new registry on it:
// they must come above every lecture of every shard, the largest of which
// is in m1's second table, which the GORM plugin's own floor never reads.
// A registry given no floor is refused the sequence by the wiped store.
func (h FloorHarness[DB]) everyShard(t *testing.T, b Backend) {
	ctx := context.Background()
	dbs := b.Open(t)
	storeDB := dbs[0].Open(t) // the store's tables live beside m0's lectures
	r := LectureRouter(t)
	repoOn := func(reg engine.Provider) Repository[DB] {
		return h.New(t, r, []*DB{h.Open(t, dbs[0], reg), h.Open(t, dbs[1], reg)}, reg)
	}

	regA := StoreRegistry(t, OpenStore(t, storeDB, sqlstore.Settings{Init: true}))
	repoA := repoOn(regA)
	err := repoA.ForEach(ctx, func(s sharding.Shard, db *DB) error {
		if s.TableName == "lecture_3" {
			return nil
		}
		return h.Exec(db, Table(s, createLecture))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Lectures(ctx, repoA, 41); err != nil {
		t.Fatal(err)
	}
	before := h.lectures(t, repoA)
	top, where := int64(0), sharding.Shard{}
	for s, ids := range before {
		for _, id := range ids {
			if id > top {
				top, where = id, s
			}
		}
	}
	if where.Database != 1 || where.TableName != "lecture_2" {
		t.Fatalf("the largest lecture, %d, is in %s: the test wants it in m1.lecture_2", top, where)
	}
	regA.Close()
	Wipe(t, storeDB)

	wiped := OpenStore(t, storeDB, sqlstore.Settings{}) // not brand-new: it may have handed out IDs
	regC := StoreRegistry(t, wiped)
	if err := RefusedChain(t, regC, "lecture"); !errors.Is(err, engine.ErrNoFloor) {
		t.Fatalf("a registry without floors on the wiped store: err = %v, want engine.ErrNoFloor", err)
	}
	regC.Close()

	regB := &floorCounter{Registry: StoreRegistry(t, wiped)}
	repoB := repoOn(regB)
	if h.Migrate != nil {
		if err := h.Migrate(ctx, repoB); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent first Creates: none draws before the floors are added.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []int64
	)
	for range 4 {
		wg.Go(func() {
			got, err := h.Lectures(ctx, repoB, 2)
			if err != nil {
				t.Errorf("lectures after the wipe: %v", err)
			}
			mu.Lock()
			ids = append(ids, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	added := regB.added()
	if _, err := h.Lectures(ctx, repoB, 1); err != nil {
		t.Fatal(err)
	}
	if regB.added() != added || added == 0 {
		t.Errorf("%d floors added for the lectures before a further Create, %d after: want the same, at least 1", added, regB.added())
	}
	for _, id := range ids {
		if id <= top {
			t.Errorf("lecture %d drawn after the wipe is not above %d, the largest in %s", id, top, where)
		}
	}
	after := h.lectures(t, repoB)
	seen := map[int64]bool{}
	for s, ids := range after {
		Placed(t, r, s, ids, seen)
	}
	if len(seen) != 41+8+1 {
		t.Errorf("%d lectures read back, want %d", len(seen), 41+8+1)
	}
}

// floorCounter is a registry that counts the floors added to it.
type floorCounter struct {
	*idforge.Registry
	mu sync.Mutex
	n  int
}

func (c *floorCounter) AddFloor(name string, f engine.Floor) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	c.Registry.AddFloor(name, f)
}

func (c *floorCounter) added() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// lectures reads the IDs of every shard that has a table.
func (h FloorHarness[DB]) lectures(t *testing.T, repo Repository[DB]) map[sharding.Shard][]int64 {
	t.Helper()
	out := map[sharding.Shard][]int64{}
	err := repo.ForEach(context.Background(), func(s sharding.Shard, db *DB) error {
		if s.TableName == "lecture_3" {
			return nil
		}
		ids, err := h.IDs(db, Table(s, "SELECT id FROM {table}"))
		out[s] = ids
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unlistedShards: an interval router without an End cannot list its
// tables, so nothing reads where the invoice numbers end. A store that
// may have handed them out refuses the sequence, even though the GORM
// plugin's floor (the invoices table, which does not exist) answers 0;
// with a Floor of its own, the store starts above it.
func (h FloorHarness[DB]) unlistedShards(t *testing.T, b Backend) {
	ctx := context.Background()
	d := b.Open(t)[0]
	storeDB := d.Open(t)
	r, err := sharding.NewInterval(sharding.Interval{Layout: snowflake.Default, Table: "invoice_{200601}",
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tables, err := r.Tables(now.AddDate(0, -1, 0), now.AddDate(0, 1, 0)) // the month of the IDs drawn now
	if err != nil {
		t.Fatal(err)
	}

	reg := StoreRegistry(t, OpenStore(t, storeDB, sqlstore.Settings{})) // not brand-new
	db := h.Open(t, d, reg)
	for _, table := range tables {
		if err := h.Exec(db, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY, number BIGINT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = h.Invoice(ctx, h.New(t, r, []*DB{db}, reg))
	if !errors.Is(err, engine.ErrNoFloor) {
		t.Fatalf("invoice on a store that is not brand-new, behind a router that lists no shards: err = %v, want engine.ErrNoFloor", err)
	}
	reg.Close()

	const floor = 1000
	withFloor := OpenStore(t, storeDB, sqlstore.Settings{Floor: func(_ context.Context, name string) (int64, error) {
		if name != "invoice" {
			return 0, engine.ErrNoFloor
		}
		return floor, nil
	}})
	reg = StoreRegistry(t, withFloor)
	n, err := h.Invoice(ctx, h.New(t, r, []*DB{h.Open(t, d, reg)}, reg))
	if err != nil || n <= floor {
		t.Fatalf("invoice on a store with a Floor of %d: number %d, err %v", floor, n, err)
	}
}

// OpenStore opens a sqlstore on db, creating its tables, with no reset
// grace to wait: no other process uses it.
func OpenStore(t testing.TB, db *sql.DB, s sqlstore.Settings) *sqlstore.Store {
	t.Helper()
	s.CreateTables, s.ResetGrace = true, -1
	st, err := sqlstore.Open(context.Background(), db, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Wipe empties the store's tables, as a reset does: everything it handed
// out is forgotten, its epoch too.
func Wipe(t testing.TB, db *sql.DB) {
	t.Helper()
	for _, table := range []string{"idforge_meta", "idforge_machine", "idforge_segment"} {
		if _, err := db.Exec("DELETE FROM " + table); err != nil {
			t.Fatalf("emptying %s: %v", table, err)
		}
	}
}

// StoreRegistry is an idforge registry on st, with the "chain" and
// "segment" kinds, closed when the test ends.
func StoreRegistry(t testing.TB, st idforge.Store) *idforge.Registry {
	t.Helper()
	reg, err := idforge.New(context.Background(), idforge.Settings{Store: st, Namespace: "shardfloor",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// RefusedChain returns what the chain name of reg answers once the store
// has refused it a range: it waits for the chain's worker to report a
// failed fetch (the test's deadline bounds the wait), then asks with a
// context already ended, which answers at once with the store's error.
func RefusedChain(t testing.TB, reg *idforge.Registry, name string) error {
	t.Helper()
	g, err := reg.Generator(context.Background(), genreg.Chain, name)
	if err != nil {
		return err
	}
	for failed := false; !failed; time.Sleep(time.Millisecond) {
		for _, c := range reg.Stats().Generators {
			if c.Kind == genreg.Chain && c.Name == name && c.LastError != nil {
				failed = true
			}
		}
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.NextID(ended)
	return err
}
