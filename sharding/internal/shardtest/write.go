package shardtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// names reads the names of the rows with ids (Get), by ID; missing rows
// are left out.
func (h Harness[DB, Row]) names(t *testing.T, repo Repository[DB], ids ...int64) map[int64]string {
	t.Helper()
	var got []Row
	if err := repo.Get(context.Background(), ids, &got); err != nil && !errors.Is(err, sharding.ErrNotFound) {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for i := range got {
		out[h.ID(&got[i])] = h.Name(&got[i])
	}
	return out
}

// updateDelete updates and deletes rows routed by their ID: by IDs in
// their shards, by Where over every shard; an ID moved within its shard
// is allowed, out of it refused; a dropped table makes a FanoutError
// after the other shards committed.
func (h Harness[DB, Row]) updateDelete(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b)
	rows := h.rows(16)
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return h.ID(&rows[i]) }
	model := new(Row)

	n, err := repo.Update(ctx, sharding.Query{IDs: []int64{id(0), id(1), id(2)}}, model, map[string]any{"name": "renamed"})
	if err != nil || n != 3 {
		t.Fatalf("Update of three IDs in three shards: %d rows, %v", n, err)
	}
	if got := h.names(t, repo, id(0), id(2), id(3)); got[id(0)] != "renamed" || got[id(2)] != "renamed" || got[id(3)] != "row 3" {
		t.Errorf("names after the Update = %v", got)
	}
	n, err = repo.Update(ctx, sharding.Query{Where: "user_id = ? AND name <> ?", Args: []any{1, "renamed"}}, model, map[string]any{"Name": "all"})
	if err != nil || n != 13 {
		t.Errorf("Update by Where over every shard: %d rows, %v; want 13", n, err)
	}

	// The course rule keeps an ID's shard when it moves by 4; the clock
	// stands still, so the last ID + 4 was never issued.
	moved := id(15) + 4
	if n, err := repo.Update(ctx, sharding.Query{IDs: []int64{id(15)}}, model, map[string]any{"id": moved}); err != nil || n != 1 {
		t.Errorf("Update of an ID within its shard: %d rows, %v", n, err)
	}
	if got := h.names(t, repo, moved, id(15)); len(got) != 1 || got[moved] != "all" {
		t.Errorf("after moving id %d to %d: %v", id(15), moved, got)
	}
	for name, v := range map[string]any{"another shard": id(6) + 1, "an expression": "id + 4"} {
		_, err := repo.Update(ctx, sharding.Query{IDs: []int64{id(6)}}, model, map[string]any{"id": v, "name": "moved"})
		if !errors.Is(err, sharding.ErrWrongShard) {
			t.Errorf("Update of an ID to %s: err = %v, want sharding.ErrWrongShard", name, err)
		}
	}
	if got := h.names(t, repo, id(6)); got[id(6)] != "all" {
		t.Errorf("a refused Update wrote: %v", got)
	}
	for name, c := range map[string]struct {
		q   sharding.Query
		set map[string]any
	}{
		"every row":      {sharding.Query{}, map[string]any{"name": "x"}},
		"with an order":  {sharding.Query{Where: "1 = 1", Order: "id"}, map[string]any{"name": "x"}},
		"with a limit":   {sharding.Query{IDs: []int64{id(1)}, Limit: 1}, map[string]any{"name": "x"}},
		"no column":      {sharding.Query{IDs: []int64{id(1)}}, nil},
		"unknown column": {sharding.Query{IDs: []int64{id(1)}}, map[string]any{"colour": "x"}},
		"args, no where": {sharding.Query{IDs: []int64{id(1)}, Args: []any{1}}, map[string]any{"name": "x"}},
	} {
		if _, err := repo.Update(ctx, c.q, model, c.set); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("Update of %s: err = %v, want engine.ErrInvalidConfig", name, err)
		}
	}
	if _, err := repo.Delete(ctx, sharding.Query{}, model); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Delete of every row: err = %v, want engine.ErrInvalidConfig", err)
	}

	if n, err := repo.Delete(ctx, sharding.Query{IDs: []int64{id(0), id(7)}}, model); err != nil || n != 2 {
		t.Errorf("Delete of two IDs: %d rows, %v", n, err)
	}
	if got := h.names(t, repo, id(0), id(7), id(8)); len(got) != 1 {
		t.Errorf("after deleting two rows: %v", got)
	}
	if n, err := repo.Delete(ctx, sharding.Query{Where: "name = ?", Args: []any{"renamed"}}, model); err != nil || n != 2 {
		t.Errorf("Delete by Where: %d rows, %v; want the two renamed rows left", n, err)
	}

	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Exec(db3, "DROP TABLE "+quote(b, s3)); err != nil {
		t.Fatal(err)
	}
	n, err = repo.Update(ctx, sharding.Query{Where: "name = ?", Args: []any{"all"}}, model, map[string]any{"name": "late"})
	var fe *sharding.FanoutError
	if !errors.As(err, &fe) || fe.Failed[s3] == nil || len(fe.Answered) != 3 {
		t.Fatalf("Update with %s's table dropped: err = %v, want a FanoutError naming it", s3, err)
	}
	var left []Row
	for _, s := range fe.Answered {
		db, _, err := repo.DB(h.keyIn(t, s))
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.Rows(ctx, s, db)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, got...)
	}
	for i := range left {
		if h.Name(&left[i]) != "late" {
			t.Errorf("row %d in an answered shard was not updated: %+v", h.ID(&left[i]), left[i])
		}
	}
	if int64(len(left)) != n {
		t.Errorf("Update reports %d rows changed in the answered shards, which hold %d", n, len(left))
	}
}

// keyIn returns an ID routing to s under the course rule.
func (h Harness[DB, Row]) keyIn(t *testing.T, s sharding.Shard) int64 {
	t.Helper()
	for id := int64(1); id < 100; id++ {
		if got, _ := CourseRouter(t).Route(id); got == s {
			return id
		}
	}
	t.Fatalf("no ID routes to %s", s)
	return 0
}

// updateOwners updates and deletes rows routed by their user: by Key in
// the user's shard; a new user must route to the same shard (with
// owner-keyed IDs, keep the IDs' residue, which only an Update by Key
// tells).
func (h Harness[DB, Row]) updateOwners(t *testing.T, b Backend) {
	ctx := context.Background()
	model := new(Row)
	for _, owned := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownerIDs=%v", owned), func(t *testing.T) {
			s := sharding.Settings{ShardKey: "UserID"}
			reg := Registry(t)
			if owned {
				s.OwnerResidues = 12
				reg = OwnerRegistry(t)
			}
			repo, _ := h.courseOn(t, b, reg, s)
			var rows []Row
			for i := range 12 {
				rows = append(rows, h.Row(fmt.Sprint("row ", i), int64(100+i%4)))
			}
			if err := repo.Create(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if n, err := repo.Update(ctx, sharding.Query{Key: 101}, model, map[string]any{"name": "of 101"}); err != nil || n != 3 {
				t.Errorf("Update by Key: %d rows, %v", n, err)
			}
			var got []Row
			if err := repo.Find(ctx, 101, &got); err != nil || len(got) != 3 || h.Name(&got[2]) != "of 101" {
				t.Errorf("Find(101) after the Update = %+v, %v", got, err)
			}
			away, along := int64(102), int64(113) // 113 ≡ 101 mod 12 (and mod 4): the same shard
			if _, err := repo.Update(ctx, sharding.Query{Key: 101}, model, map[string]any{"user_id": away}); !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("Update moving user 101's rows to user %d of another shard: err = %v, want sharding.ErrWrongShard", away, err)
			}
			if owned {
				ids := []int64{h.ID(&got[0])}
				if _, err := repo.Update(ctx, sharding.Query{IDs: ids}, model, map[string]any{"user_id": along}); !errors.Is(err, sharding.ErrWrongShard) {
					t.Errorf("Update of an owner-keyed row's user by ID: err = %v, want sharding.ErrWrongShard (the old user is unknown)", err)
				}
				if _, err := repo.Update(ctx, sharding.Query{Key: 101}, model, map[string]any{"user_id": int64(105)}); !errors.Is(err, sharding.ErrWrongShard) {
					t.Errorf("Update to user 105, of 101's shard but another residue mod 12: err = %v, want sharding.ErrWrongShard", err)
				}
			}
			if n, err := repo.Update(ctx, sharding.Query{Key: 101}, model, map[string]any{"user_id": along}); err != nil || n != 3 {
				t.Errorf("Update moving user 101's rows to user %d of the same shard: %d rows, %v", along, n, err)
			}
			if err := repo.Find(ctx, along, &got); err != nil || len(got) != 3 {
				t.Errorf("Find(%d) = %d rows, %v; want 3", along, len(got), err)
			}
			if owned {
				ids := []int64{h.ID(&got[0]), h.ID(&got[1]), h.ID(&got[2])}
				if names := h.names(t, repo, ids...); len(names) != 3 {
					t.Errorf("Get by owner-keyed ID after the owner changed: %v", names)
				}
			}
			if n, err := repo.Delete(ctx, sharding.Query{Key: 100}, model); err != nil || n != 3 {
				t.Errorf("Delete by Key: %d rows, %v", n, err)
			}
			if err := repo.Find(ctx, 100, &got); err != nil || len(got) != 0 {
				t.Errorf("Find(100) after the Delete = %+v, %v", got, err)
			}
			if n, err := repo.Delete(ctx, sharding.Query{Key: 102, Where: "name = ?", Args: []any{"row 2"}}, model); err != nil || n != 1 {
				t.Errorf("Delete by Key and Where: %d rows, %v", n, err)
			}
		})
	}
}
