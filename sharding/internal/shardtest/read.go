package shardtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/sharding"
)

// get reads rows by ID: in the order asked, each once, the missing ones
// listed; into a slice of pointers too; and a dropped table makes a
// FanoutError naming its shard and the three that answered.
func (h Harness[DB, Row]) get(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b)
	rows := h.rows(40)
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var ask []int64
	var want []Row
	for _, i := range rng.Perm(len(rows))[:25] {
		ask = append(ask, h.ID(&rows[i]))
		want = append(want, rows[i])
	}
	last := h.ID(&rows[len(rows)-1]) // the clock stands still: the next IDs were never issued
	missing := []int64{last + 2, last + 1}
	ask = slices.Insert(ask, 7, missing[0])
	ask = append(ask, ask[3], missing[1]) // ask[3] asked twice, returned once, at its first place
	var got []Row
	err := repo.Get(ctx, ask, &got)
	var me *sharding.MissingError
	if !errors.As(err, &me) || !errors.Is(err, sharding.ErrNotFound) || !slices.Equal(me.IDs, missing) {
		t.Fatalf("Get with two IDs missing: err = %v, want a MissingError listing %v", err, missing)
	}
	h.sameRows(t, "Get", got, want)

	var ptrs []*Row
	all := make([]int64, len(rows))
	for i := range rows {
		all[i] = h.ID(&rows[i])
	}
	if err := repo.Get(ctx, all, &ptrs); err != nil || len(ptrs) != len(rows) {
		t.Fatalf("Get of every ID into pointers: %d rows, %v", len(ptrs), err)
	}
	for i, p := range ptrs {
		if !h.Same(*p, rows[i]) {
			t.Errorf("Get into pointers: row %d = %+v, want %+v", i, *p, rows[i])
		}
	}
	if err := repo.Get(ctx, nil, &got); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Get of no IDs = %v, %v; want an empty slice", got, err)
	}
	for _, bad := range [][]int64{{all[0], 0}, {-3}} {
		if err := repo.Get(ctx, bad, &got); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Get(%v): err = %v, want engine.ErrInvalidID", bad, err)
		}
	}
	var one Row
	if err := repo.Get(ctx, all[:1], &one); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Get into a struct: err = %v, want engine.ErrInvalidConfig (a slice is needed)", err)
	}

	db3, s3, err := repo.DB(3) // id 3 → m1.course_1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Exec(db3, "DROP TABLE "+quote(b, s3)); err != nil {
		t.Fatal(err)
	}
	got = nil
	err = repo.Get(ctx, all, &got)
	var fe *sharding.FanoutError
	if !errors.As(err, &fe) || len(fe.Failed) != 1 || fe.Failed[s3] == nil || len(fe.Answered) != 3 || got != nil {
		t.Fatalf("Get with %s's table dropped: err = %v, %d rows; want a FanoutError naming it, three shards answered, no rows", s3, err, len(got))
	}
	if slices.Contains(fe.Answered, s3) {
		t.Errorf("FanoutError lists %s as answered: %v", s3, fe.Answered)
	}

	// Routed by the user, an ID does not tell its shard.
	byUser, _ := h.course(t, b, sharding.Settings{ShardKey: "UserID"})
	if err := byUser.Get(ctx, all[:2], &got); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Get with rows routed by UserID: err = %v, want engine.ErrInvalidConfig", err)
	}
}

// sameRows checks got holds want, in order.
func (h Harness[DB, Row]) sameRows(t *testing.T, what string, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
		return
	}
	for i := range want {
		if !h.Same(got[i], want[i]) {
			t.Errorf("%s: row %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// findOwner reads every row of an owner (a user, rows routed by UserID)
// with Find into a slice, in ID order; into a struct, the first of them.
func (h Harness[DB, Row]) findOwner(t *testing.T, b Backend) {
	ctx := context.Background()
	repo, _ := h.course(t, b, sharding.Settings{ShardKey: "UserID"})
	var rows []Row
	for i := range 12 {
		rows = append(rows, h.Row(fmt.Sprint("row ", i), int64(100+i%4)))
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for user := int64(100); user < 104; user++ {
		var want []Row
		for _, r := range rows {
			if h.User(&r) == user {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b Row) int { return cmp.Compare(h.ID(&a), h.ID(&b)) })
		var got []Row
		if err := repo.Find(ctx, user, &got); err != nil {
			t.Fatal(err)
		}
		h.sameRows(t, fmt.Sprintf("Find(user %d) into a slice", user), got, want)
		var first Row
		if err := repo.Find(ctx, user, &first); err != nil || !h.Same(first, want[0]) {
			t.Errorf("Find(user %d) into a struct = %+v, %v; want the first by ID, %+v", user, first, err, want[0])
		}
	}
	var none []Row
	if err := repo.Find(ctx, 999, &none); err != nil || len(none) != 0 {
		t.Errorf("Find of a user without rows into a slice = %v, %v; want none and no error", none, err)
	}
}

// ownerIDs routes rows by their user with owner-keyed IDs: each ID routes
// like its user and is found by Get and by Find of the user; a retry keeps
// the IDs; a set ID that routes elsewhere is refused, one that routes
// with its user kept; a 63-bit layout leaves no room.
func (h Harness[DB, Row]) ownerIDs(t *testing.T, b Backend) {
	ctx := context.Background()
	const residues = 12
	owned := sharding.Settings{ShardKey: "UserID", OwnerResidues: residues}
	repo, _ := h.courseOn(t, b, OwnerRegistry(t), owned)
	r := CourseRouter(t)
	var rows []Row
	for i := range 24 {
		rows = append(rows, h.Row(fmt.Sprint("order ", i), int64(100+i%6)))
	}
	if err := repo.Create(ctx, rows); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i := range rows {
		id, user := h.ID(&rows[i]), h.User(&rows[i])
		ids[i] = id
		at, _ := r.Route(id)
		want, _ := r.Route(user)
		if at != want || id%residues != user%residues {
			t.Errorf("row %d: id %d routes to %s, its user %d to %s", i, id, at, user, want)
		}
		if issued, _, _, err := snowflake.JSSafe.Decode(id / residues); err != nil || !issued.Equal(Start) {
			t.Errorf("row %d: id %d / %d decodes to %v, %v; want the JSSafe snowflake drawn at %v", i, id, residues, issued, err, Start)
		}
	}
	h.allOnceIn(t, r, repo, rows) // every row lies where its ID routes
	var got []Row
	if err := repo.Get(ctx, ids, &got); err != nil {
		t.Fatal(err)
	}
	h.sameRows(t, "Get of owner-keyed IDs", got, rows)
	if err := repo.Find(ctx, 103, &got); err != nil {
		t.Fatal(err)
	}
	h.sameRows(t, "Find(user 103)", got, []Row{rows[3], rows[9], rows[15], rows[21]})
	if err := repo.Create(ctx, rows); err != nil { // stored: skipped, the IDs kept
		t.Fatal(err)
	}
	for i := range rows {
		if h.ID(&rows[i]) != ids[i] {
			t.Errorf("Create again changed row %d's ID from %d to %d", i, ids[i], h.ID(&rows[i]))
		}
	}

	away := h.WithID(h.Row("pinned away", 101), 1000*residues+100%residues) // routes like user 100
	if err := repo.Create(ctx, &away); !errors.Is(err, engine.ErrInvalidID) || !errors.Is(err, sharding.ErrWrongShard) {
		t.Errorf("a set ID routing away from its user: err = %v, want engine.ErrInvalidID and sharding.ErrWrongShard", err)
	}
	// Residue 9 routes like 101's 5 over 4 shards, not over 12.
	residue := h.WithID(h.Row("pinned aside", 101), 1000*residues+101%residues+4)
	if err := repo.Create(ctx, &residue); !errors.Is(err, sharding.ErrWrongShard) || !strings.Contains(err.Error(), "owner 101") {
		t.Errorf("a set ID of its user's shard but another residue: err = %v, want sharding.ErrWrongShard naming the owner", err)
	}
	kept := h.WithID(h.Row("pinned", 101), 1000*residues+101%residues)
	if err := repo.Create(ctx, &kept); err != nil || h.ID(&kept) != 1000*residues+101%residues {
		t.Errorf("a set ID routing with its user: id %d, %v", h.ID(&kept), err)
	}
	h.allOnceIn(t, r, repo, append(rows, kept))

	wide, _ := h.course(t, b, owned) // the default 63-bit layout
	row := h.Row("wide", 100)
	if err := wide.Create(ctx, &row); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "bits") {
		t.Errorf("owner-keyed IDs from a 63-bit layout: err = %v, want engine.ErrInvalidID naming the bits", err)
	}

	dbs, reg := b.Open(t), Registry(t)
	two := []*DB{h.Open(t, dbs[0], reg), h.Open(t, dbs[1], reg)}
	for name, s := range map[string]sharding.Settings{
		"no shard key":        {OwnerResidues: 12},
		"not a multiple of 4": {ShardKey: "UserID", OwnerResidues: 6},
		"negative":            {ShardKey: "UserID", OwnerResidues: -4},
	} {
		if _, err := h.New(r, reg, two, s); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "OwnerResidues") {
			t.Errorf("%s: err = %v, want engine.ErrInvalidConfig naming OwnerResidues", name, err)
		}
	}
	byID, _ := h.course(t, b, sharding.Settings{ShardKey: "ID", OwnerResidues: 12})
	if err := byID.Create(ctx, &row); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("owner-keyed IDs routed by the ID itself: err = %v, want engine.ErrInvalidConfig", err)
	}
}
