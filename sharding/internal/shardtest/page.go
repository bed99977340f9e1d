package shardtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// page reads pages over every shard, merged in order, by keyset; narrowed
// by Where, Key and IDs; counts; refuses orders it cannot merge; and a
// dropped table makes a FanoutError and no rows.
func (h Harness[DB, Row]) page(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b)
	rng := rand.New(rand.NewPCG(10, 11))
	rows := make([]Row, 60)
	for i := range rows {
		rows[i] = h.Row(fmt.Sprint("row ", i), 1+rng.Int64N(7))
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	sorted := func(keep func(r *Row) bool, c func(a, b *Row) int) []Row {
		var out []Row
		for i := range rows {
			if keep == nil || keep(&rows[i]) {
				out = append(out, rows[i])
			}
		}
		slices.SortFunc(out, func(a, b Row) int { return c(&a, &b) })
		return out
	}
	byID := func(a, b *Row) int { return cmp.Compare(h.ID(a), h.ID(b)) }
	userDesc := func(a, b *Row) int { return -cmp.Or(cmp.Compare(h.User(a), h.User(b)), byID(a, b)) }

	for _, c := range []struct {
		name string
		q    sharding.Query
		want []Row
	}{
		{"by user, descending", sharding.Query{Order: "user_id DESC", Limit: 7}, sorted(nil, userDesc)},
		{"by the Go field, ascending", sharding.Query{Order: "UserID asc", Limit: 9},
			sorted(nil, func(a, b *Row) int { return cmp.Or(cmp.Compare(h.User(a), h.User(b)), byID(a, b)) })},
		{"where, by ID", sharding.Query{Where: "user_id = ?", Args: []any{3}, Limit: 4},
			sorted(func(r *Row) bool { return h.User(r) == 3 }, byID)},
		{"by ID, descending, no limit", sharding.Query{Order: "id DESC"}, sorted(nil, func(a, b *Row) int { return -byID(a, b) })},
	} {
		var all []Row
		pages := 0
		q := c.q
		for {
			var page []Row
			if err := repo.Page(ctx, q, &page); err != nil {
				t.Fatalf("%s: page %d: %v", c.name, pages, err)
			}
			if len(page) == 0 {
				break
			}
			if q.Limit > 0 && len(page) > q.Limit {
				t.Fatalf("%s: a page of %d rows, limit %d", c.name, len(page), q.Limit)
			}
			pages++
			all = append(all, page...)
			q.After = &page[len(page)-1]
			if q.Limit == 0 {
				break
			}
		}
		h.sameRows(t, c.name, all, c.want)
		t.Logf("%s: %d rows in %d pages", c.name, len(all), pages)
	}

	var got []Row
	id5 := h.ID(&rows[5])
	if err := repo.Page(ctx, sharding.Query{Key: id5}, &got); err != nil || len(got) != 1 || !h.Same(got[0], rows[5]) {
		t.Errorf("Page by Key (the ID) = %+v, %v", got, err)
	}
	ids := []int64{h.ID(&rows[9]), h.ID(&rows[2]), h.ID(&rows[30])}
	if err := repo.Page(ctx, sharding.Query{IDs: ids, Order: "id DESC", Limit: 2}, &got); err != nil {
		t.Fatal(err)
	}
	h.sameRows(t, "Page by IDs", got, []Row{rows[30], rows[9]})

	model := new(Row)
	for name, c := range map[string]struct {
		q    sharding.Query
		want int
	}{
		"every row": {sharding.Query{}, len(rows)},
		"where":     {sharding.Query{Where: "user_id = ?", Args: []any{3}}, len(sorted(func(r *Row) bool { return h.User(r) == 3 }, byID))},
		"IDs":       {sharding.Query{IDs: ids}, 3},
		"Key":       {sharding.Query{Key: id5}, 1},
	} {
		if n, err := repo.Count(ctx, c.q, model); err != nil || n != int64(c.want) {
			t.Errorf("Count of %s = %d, %v; want %d", name, n, err, c.want)
		}
	}
	if _, err := repo.Count(ctx, sharding.Query{Limit: 3}, model); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Count with a limit: err = %v, want engine.ErrInvalidConfig", err)
	}
	for name, q := range map[string]sharding.Query{
		"text order":      {Order: "name"},
		"unknown column":  {Order: "colour"},
		"bad direction":   {Order: "id sideways"},
		"negative limit":  {Limit: -1},
		"after a string":  {After: "row 3"},
		"args, no where":  {Args: []any{1}},
		"an ID below one": {IDs: []int64{0}},
	} {
		want := engine.ErrInvalidConfig
		if name == "an ID below one" {
			want = engine.ErrInvalidID
		}
		if err := repo.Page(ctx, q, &got); !errors.Is(err, want) {
			t.Errorf("Page with %s: err = %v, want %v", name, err, want)
		}
	}

	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Exec(db3, "DROP TABLE "+quote(b, s3)); err != nil {
		t.Fatal(err)
	}
	got = nil
	err = repo.Page(ctx, sharding.Query{Limit: 10}, &got)
	var fe *sharding.FanoutError
	if !errors.As(err, &fe) || fe.Failed[s3] == nil || len(fe.Answered) != 3 || got != nil {
		t.Errorf("Page with %s's table dropped: err = %v, %d rows; want a FanoutError naming it, no rows", s3, err, len(got))
	}
	if n, err := repo.Count(ctx, sharding.Query{}, model); !errors.As(err, &fe) || n != 0 || len(fe.Answered) != 3 {
		t.Errorf("Count with %s's table dropped: %d, %v; want 0 and a FanoutError", s3, n, err)
	}
}

// concurrent runs 32 goroutines on one repository of owner-keyed rows:
// each writes (Create, Exec, Update), reads (Get, Find, Page, Count) and
// deletes its own user's rows while others page, count and scan
// (ForEach) over every shard.
func (h Harness[DB, Row]) concurrent(t *testing.T, b Backend) {
	ctx := context.Background()
	const workers, each = 32, 6
	repo, _ := h.courseOn(t, b, OwnerRegistry(t), sharding.Settings{ShardKey: "UserID", OwnerResidues: 12, Parallel: 2})
	model := new(Row)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			user := int64(1000 + w)
			rows := make([]Row, each)
			for i := range rows {
				rows[i] = h.Row(fmt.Sprintf("u%d r%d", user, i), user)
			}
			if err := repo.Create(ctx, rows); err != nil {
				t.Error(err)
				return
			}
			ids := make([]int64, each)
			for i := range rows {
				ids[i] = h.ID(&rows[i])
			}
			var got []Row
			if err := repo.Get(ctx, ids, &got); err != nil || len(got) != each {
				t.Errorf("user %d: Get = %d rows, %v", user, len(got), err)
			}
			var found []Row
			if err := repo.Find(ctx, user, &found); err != nil || len(found) != each {
				t.Errorf("user %d: Find = %d rows, %v", user, len(found), err)
			}
			if err := repo.Exec(ctx, "UPDATE {table} SET name = ? WHERE user_id = ?", fmt.Sprint("exec ", user), user); err != nil {
				t.Errorf("user %d: Exec: %v", user, err)
			}
			if err := repo.Find(ctx, user, &found); err != nil || len(found) != each || h.Name(&found[0]) != fmt.Sprint("exec ", user) {
				t.Errorf("user %d: Find after Exec = %+v, %v", user, found, err)
			}
			if n, err := repo.Update(ctx, sharding.Query{Key: user}, model, map[string]any{"name": fmt.Sprint("done ", user)}); err != nil || n != each {
				t.Errorf("user %d: Update = %d, %v", user, n, err)
			}
			var paged []Row
			q := sharding.Query{Key: user, Order: "id DESC", Limit: 4}
			for {
				var page []Row
				if err := repo.Page(ctx, q, &page); err != nil {
					t.Errorf("user %d: Page: %v", user, err)
					return
				}
				if len(page) == 0 {
					break
				}
				paged = append(paged, page...)
				q.After = &page[len(page)-1]
			}
			if len(paged) != each || h.ID(&paged[0]) != ids[each-1] || h.Name(&paged[0]) != fmt.Sprint("done ", user) {
				t.Errorf("user %d: paged %d rows, first %+v", user, len(paged), paged)
			}
			if n, err := repo.Delete(ctx, sharding.Query{IDs: ids[:2]}, model); err != nil || n != 2 {
				t.Errorf("user %d: Delete = %d, %v", user, n, err)
			}
			if n, err := repo.Count(ctx, sharding.Query{Key: user}, model); err != nil || n != each-2 {
				t.Errorf("user %d: Count = %d, %v", user, n, err)
			}
			if w%8 == 0 { // a few read every shard meanwhile
				var page []Row
				if err := repo.Page(ctx, sharding.Query{Order: "user_id", Limit: 10}, &page); err != nil {
					t.Errorf("Page over every shard: %v", err)
				}
				if _, err := repo.Count(ctx, sharding.Query{}, model); err != nil {
					t.Errorf("Count over every shard: %v", err)
				}
				mine := 0
				err := repo.ForEach(ctx, func(s sharding.Shard, db *DB) error {
					got, err := h.Rows(ctx, s, db)
					for i := range got {
						if h.User(&got[i]) == user {
							mine++
						}
					}
					return err
				})
				if err != nil || mine != each-2 {
					t.Errorf("user %d: ForEach found %d rows, %v; want %d", user, mine, err, each-2)
				}
			}
		})
	}
	wg.Wait()
	if n, err := repo.Count(ctx, sharding.Query{}, model); err != nil || n != workers*(each-2) {
		t.Errorf("Count after the workers = %d, %v; want %d", n, err, workers*(each-2))
	}
}
