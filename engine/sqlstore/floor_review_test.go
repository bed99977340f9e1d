package sqlstore_test

import (
	"context"
	"math"
	"testing"

	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/testdb"
)

// TestFloorLostRaiseAfterFailedFetch: the raise to Floor's answer commits,
// the fetch that follows fails (here: an overflowing step; in production a
// crash of the primary), and the raise is lost with the epoch intact (an
// asynchronous replica promoted). The store value marked the name floored,
// so its next fetch neither asks Floor again nor knows the answer as its own
// floor: it recreates the counter at Start, below the rows Floor reported.
func TestFloorLostRaiseAfterFailedFetch(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		admin := d.Open(t)
		ctx := t.Context()
		calls := 0
		s := openStore(t, d, sqlstore.WithFloor(func(context.Context, string) (int64, error) {
			calls++
			return 41_000, nil
		}))
		seg, err := s.Segment("order")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := seg.NextMaxID(ctx, math.MaxInt64); err == nil {
			t.Fatal("an overflowing step succeeded")
		}
		// The raise's commit is lost; the epoch stays.
		if _, err := admin.ExecContext(ctx, d.Rebind("DELETE FROM idforge_segment WHERE name = ?"), "order"); err != nil {
			t.Fatal(err)
		}
		got, err := seg.NextMaxID(ctx, 100)
		for i := 0; err != nil && i < 3; i++ {
			t.Logf("fetch: %v", err)
			got, err = seg.NextMaxID(ctx, 100)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got-100 < 41_000 {
			t.Errorf("got (%d, %d] after Floor said 41,000 (Floor asked %d times)", got-100, got, calls)
		}
	})
}
