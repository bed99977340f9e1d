package repo

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/sharding"
)

// fakeDB is a database of the fake ORM: rows of every shard, in memory.
type fakeDB struct {
	name string
}

type fakeRow struct {
	ID    int64
	Owner int64
}

// fakeStore holds rows by shard and counts the statements each shard got.
type fakeStore struct {
	mu     sync.Mutex
	rows   map[sharding.Shard][]fakeRow
	calls  map[sharding.Shard]int
	limits []int // the limit of each Select
	unions []int // the parts of each SelectShards
	fail   map[sharding.Shard]error
	// gate, when set, runs before each statement.
	gate func()
}

func fakeModel() *Model {
	id := &Col{Name: "id", Type: reflect.TypeFor[int64](), Get: func(row reflect.Value) reflect.Value { return row.Field(0) }}
	return &Model{Name: "fakeRow", Elem: reflect.TypeFor[fakeRow](), ID: id, Key: id, Column: func(string) *Col { return nil }}
}

// newFake returns a repository over r's shards, one fake database per
// database of r, holding rows 1..n where they route.
func newFake(t *testing.T, r *sharding.Router, dbs int, n int64, s sharding.Settings) (*Base[fakeDB], *fakeStore) {
	t.Helper()
	return newFakeOn(t, "sqlite", r, dbs, n, s)
}

// newFakeOn is newFake whose databases speak dialect.
func newFakeOn(t *testing.T, dialect string, r *sharding.Router, dbs int, n int64, s sharding.Settings) (*Base[fakeDB], *fakeStore) {
	t.Helper()
	var list []*fakeDB
	for i := range dbs {
		list = append(list, &fakeDB{name: string(rune('a' + i))})
	}
	b, err := New("fake", list, r, []sharding.Settings{s}, ORM[fakeDB]{
		Database: func(db *fakeDB) (any, string, error) { return db, "", nil },
		Dialect:  func(*fakeDB) string { return dialect },
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{rows: map[sharding.Shard][]fakeRow{}, calls: map[sharding.Shard]int{}, fail: map[sharding.Shard]error{}}
	for id := int64(1); id <= n; id++ {
		s, err := r.Route(id)
		if err != nil {
			t.Fatal(err)
		}
		st.rows[s] = append(st.rows[s], fakeRow{ID: id, Owner: id})
	}
	return b, st
}

// unionStmts is stmts that also reads several shards of a database in one
// call, returning their rows shuffled (UNION ALL keeps no order); a
// database in failUnion fails such calls.
func (f *fakeStore) unionStmts(failUnion map[*fakeDB]bool) Stmts[fakeDB] {
	st := f.stmts()
	rng := rand.New(rand.NewPCG(3, 3)) // used under f.mu
	st.SelectShards = func(ctx context.Context, db *fakeDB, parts []Part, order string, limit int, dest any) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.unions = append(f.unions, len(parts))
		if failUnion[db] {
			return errors.New("no such table")
		}
		out := dest.(*[]fakeRow)
		for _, p := range parts {
			*out = append(*out, f.selectRows(p.Shard, p.Where, p.Limit)...)
		}
		// UNION ALL, then ORDER BY id LIMIT limit.
		rng.Shuffle(len(*out), func(i, j int) { (*out)[i], (*out)[j] = (*out)[j], (*out)[i] })
		slices.SortFunc(*out, func(a, b fakeRow) int { return cmp.Compare(a.ID, b.ID) })
		if limit > 0 && len(*out) > limit {
			*out = (*out)[:limit]
		}
		return nil
	}
	return st
}

// stmts selects the rows whose IDs are the condition's arguments.
func (f *fakeStore) stmts() Stmts[fakeDB] {
	return Stmts[fakeDB]{
		Select: func(_ context.Context, _ *fakeDB, s sharding.Shard, w Cond, _ string, limit int, dest any) error {
			if f.gate != nil {
				f.gate()
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.calls[s]++
			if err := f.fail[s]; err != nil {
				return err
			}
			f.limits = append(f.limits, limit)
			*dest.(*[]fakeRow) = f.selectRows(s, w, limit)
			return nil
		},
	}
}

// selectRows returns the rows of s matching w, at most limit; the caller
// holds f.mu. The conditions the fake knows: id IN (...), and id > ? of a
// page's keyset.
func (f *fakeStore) selectRows(s sharding.Shard, w Cond, limit int) []fakeRow {
	var out []fakeRow
	in, after := strings.Contains(w.SQL, " IN "), int64(0)
	if strings.Contains(w.SQL, `"id" > ?`) || strings.Contains(w.SQL, "`id` > ?") {
		after = w.Args[len(w.Args)-1].(int64)
	}
	for _, r := range f.rows[s] {
		if (!in || slices.Contains(w.Args, any(r.ID))) && r.ID > after {
			out = append(out, r)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Page over 16 shards asks each for its share of the page and a margin
// (6 rows of 50), merges the lists in order, and goes on after the last
// row of a page.
func TestPageMergesShards(t *testing.T) {
	b, st := newFake(t, sixteen(t), 2, 1000, sharding.Settings{})
	var page []fakeRow
	q := sharding.Query{Limit: 50}
	for want := int64(1); want < 200; want += 50 {
		st.limits = nil
		if err := b.Page(context.Background(), q, &page, fakeModel(), nil, st.stmts()); err != nil {
			t.Fatal(err)
		}
		if len(page) != 50 || page[0].ID != want || page[49].ID != want+49 {
			t.Fatalf("page from %d: %d rows, %v ... %v", want, len(page), page[0], page[len(page)-1])
		}
		for i := 1; i < len(page); i++ {
			if page[i].ID != page[i-1].ID+1 {
				t.Fatalf("page from %d out of order at %d: %v", want, i, page)
			}
		}
		if len(st.limits) != 16 || slices.ContainsFunc(st.limits, func(l int) bool { return l != 6 }) {
			t.Errorf("the shards were asked for %v rows, want 6 each of 16", st.limits)
		}
		q.After = page[49]
	}
}

// A shard holding the whole page is asked again, after the rows it gave,
// for what the page still needs: the page is complete in two rounds.
func TestPageSecondRound(t *testing.T) {
	r := sixteen(t)
	b, st := newFake(t, r, 2, 0, sharding.Settings{})
	shards, _ := r.Shards()
	for id := int64(1); id <= 200; id++ {
		st.rows[shards[5]] = append(st.rows[shards[5]], fakeRow{ID: id})
	}
	for i, s := range shards {
		if i != 5 {
			st.rows[s] = append(st.rows[s], fakeRow{ID: 10000 + int64(i)})
		}
	}
	var page []fakeRow
	if err := b.Page(context.Background(), sharding.Query{Limit: 50}, &page, fakeModel(), nil, st.stmts()); err != nil {
		t.Fatal(err)
	}
	if len(page) != 50 || page[0].ID != 1 || page[49].ID != 50 {
		t.Fatalf("page = %d rows, %v ... %v; want 1 ... 50", len(page), page[0], page[len(page)-1])
	}
	if want := append(slices.Repeat([]int{6}, 16), 44); !slices.Equal(st.limits, want) {
		t.Errorf("the shards were asked for %v rows, want 6 each and 44 more of the full one", st.limits)
	}
}

// Pages over shards holding random rows are the rows sorted, whatever the
// spread and the limit.
func TestPageRandomSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	r := sixteen(t)
	shards, _ := r.Shards()
	for round := range 300 {
		b, st := newFake(t, r, 2, 0, sharding.Settings{Parallel: 1 + round%8})
		var all []int64
		hot := rng.IntN(16)
		for id := int64(1); id <= int64(rng.IntN(400)); id++ {
			s := shards[rng.IntN(16)]
			if rng.IntN(3) == 0 {
				s = shards[hot] // a third of the rows in one shard
			}
			st.rows[s] = append(st.rows[s], fakeRow{ID: id})
			all = append(all, id)
		}
		limit := 1 + rng.IntN(80)
		q := sharding.Query{Limit: limit}
		var got []int64
		for {
			var page []fakeRow
			if err := b.Page(context.Background(), q, &page, fakeModel(), nil, st.stmts()); err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > limit {
				t.Fatalf("round %d: a page of %d rows, limit %d", round, len(page), limit)
			}
			for _, p := range page {
				got = append(got, p.ID)
			}
			q.After = &page[len(page)-1]
		}
		if !slices.Equal(got, all) {
			t.Fatalf("round %d (limit %d): paged %v, want %v", round, limit, got, all)
		}
	}
}

// On MySQL and PostgreSQL the shards of a database are read in one
// statement, ordered and cut by the database; a database whose statement
// fails is read shard by shard. Pages over random spreads come out right
// either way.
func TestPageOneStatementPerDatabase(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	r := sixteen(t)
	shards, _ := r.Shards()
	for round := range 200 {
		b, st := newFakeOn(t, "mysql", r, 2, 0, sharding.Settings{})
		var all []int64
		for id := int64(1); id <= int64(rng.IntN(300)); id++ {
			s := shards[rng.IntN(16)]
			if rng.IntN(3) == 0 {
				s = shards[3]
			}
			st.rows[s] = append(st.rows[s], fakeRow{ID: id, Owner: id})
			all = append(all, id)
		}
		fail := map[*fakeDB]bool{}
		if round%4 == 3 {
			fail[b.DBs[1]] = true
		}
		stmts := st.unionStmts(fail)
		m := fakeModel()
		limit := 1 + rng.IntN(60)
		q := sharding.Query{Limit: limit}
		var got []int64
		for {
			var page []fakeRow
			if err := b.Page(context.Background(), q, &page, m, nil, stmts); err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, p := range page {
				got = append(got, p.ID)
			}
			q.After = &page[len(page)-1]
		}
		if !slices.Equal(got, all) {
			t.Fatalf("round %d (limit %d): paged %v, want %v", round, limit, got, all)
		}
		if len(st.unions) == 0 || slices.ContainsFunc(st.unions, func(n int) bool { return n < 2 }) {
			t.Fatalf("round %d: statements over several shards read %v shards each", round, st.unions)
		}
		if fail[b.DBs[1]] && len(st.limits) < 8 {
			t.Fatalf("round %d: database 1's statement failed, and %d shards were read alone, want its 8 at least", round, len(st.limits))
		}
	}
}

// merge is a k-way merge: random sorted lists come out as one sorted
// list, cut at the limit.
func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for round := range 200 {
		desc := round%2 == 1
		var lists []reflect.Value
		var keys [][]sortKey
		var all []sortKey
		for range 1 + rng.IntN(20) {
			var ks []sortKey
			for range rng.IntN(30) {
				ks = append(ks, sortKey{n: rng.Int64N(10), id: rng.Int64()})
			}
			slices.SortFunc(ks, func(a, b sortKey) int {
				if desc {
					return b.compare(a)
				}
				return a.compare(b)
			})
			lists = append(lists, reflect.ValueOf(ks))
			keys = append(keys, ks)
			all = append(all, ks...)
		}
		slices.SortFunc(all, func(a, b sortKey) int {
			if desc {
				return b.compare(a)
			}
			return a.compare(b)
		})
		limit := rng.IntN(len(all) + 2)
		merged, _ := merge(reflect.TypeFor[[]sortKey](), lists, keys, desc, limit)
		got := merged.Interface().([]sortKey)
		if limit == 0 || limit > len(all) {
			limit = len(all)
		}
		if !slices.Equal(got, all[:limit]) {
			t.Fatalf("round %d: merged %v, want %v", round, got, all[:limit])
		}
	}
}

func sixteen(t *testing.T) *sharding.Router {
	r, err := sharding.NewMod(sharding.Mod{Databases: "ds_{0..1}", Tables: "t_{0..7}"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Get of 100 IDs over 16 shards sends one statement to each shard, and
// returns the rows in the order asked.
func TestGetOneQueryPerShard(t *testing.T) {
	b, st := newFake(t, sixteen(t), 2, 1000, sharding.Settings{})
	var ids []int64
	for i := int64(0); i < 100; i++ {
		ids = append(ids, 1000-7*i)
	}
	var got []fakeRow
	if err := b.Get(context.Background(), ids, &got, fakeModel(), nil, st.stmts()); err != nil {
		t.Fatal(err)
	}
	if len(st.calls) != 16 {
		t.Errorf("%d shards read, want 16", len(st.calls))
	}
	for s, n := range st.calls {
		if n != 1 {
			t.Errorf("shard %s read with %d statements, want 1", s, n)
		}
	}
	for i, r := range got {
		if r.ID != ids[i] {
			t.Fatalf("row %d has ID %d, want %d: rows come in the order asked", i, r.ID, ids[i])
		}
	}
}

// A fan-out reaches Settings.Parallel shards at once, never more.
func TestFanoutParallelBound(t *testing.T) {
	const parallel = 3
	b, st := newFake(t, sixteen(t), 2, 1000, sharding.Settings{Parallel: parallel})
	var inflight, most, arrived atomic.Int64
	release := make(chan struct{})
	st.gate = func() {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		// The first `parallel` statements wait for each other: they can
		// only all arrive if that many run at once.
		if a := arrived.Add(1); a == parallel {
			close(release)
		} else if a < parallel {
			select {
			case <-release:
			case <-time.After(time.Minute):
				t.Errorf("only %d statements ran at once, want %d", a, parallel)
			}
		}
	}
	var ids []int64
	for i := int64(1); i <= 64; i++ {
		ids = append(ids, i)
	}
	var got []fakeRow
	if err := b.Get(context.Background(), ids, &got, fakeModel(), nil, st.stmts()); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != parallel {
		t.Errorf("at most %d statements ran at once, want %d", m, parallel)
	}
}

// Two shards failing make a FanoutError naming them, listing the
// fourteen that answered in the router's order, and matching each error.
func TestFanoutError(t *testing.T) {
	r := sixteen(t)
	b, st := newFake(t, r, 2, 1000, sharding.Settings{})
	shards, _ := r.Shards()
	boom := errors.New("boom")
	st.fail[shards[3]] = boom
	st.fail[shards[12]] = context.DeadlineExceeded
	var ids []int64
	for i := int64(1); i <= 64; i++ {
		ids = append(ids, i)
	}
	got := []fakeRow{{ID: -1}}
	err := b.Get(context.Background(), ids, &got, fakeModel(), nil, st.stmts())
	var fe *sharding.FanoutError
	if !errors.As(err, &fe) || !errors.Is(err, boom) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a FanoutError matching both shards' errors", err)
	}
	want := slices.Concat(shards[:3], shards[4:12], shards[13:])
	if !slices.Equal(fe.Answered, want) || len(fe.Failed) != 2 {
		t.Errorf("answered %v, failed %v", fe.Answered, fe.Failed)
	}
	if len(got) != 1 || got[0].ID != -1 {
		t.Errorf("dest after a failed Get = %v, want it untouched", got)
	}
	t.Log(err)
}
