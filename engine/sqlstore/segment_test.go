package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

func TestSegmentFetch(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		s := openStore(t, d, sqlstore.Settings{Start: 1000})
		order, err := s.Segment("order")
		if err != nil {
			t.Fatal(err)
		}
		user, err := s.Segment("Order") // names are case-sensitive everywhere
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range []struct {
			d    segment.Distributor
			step int64
			want int64
		}{
			{order, 10, 1010}, // created on first use at the start
			{order, 10, 1020},
			{user, 5, 1005},
			{order, 100, 1120},
			{user, 1, 1006},
		} {
			got, err := tc.d.NextMaxID(ctx, tc.step)
			if err != nil || got != tc.want {
				t.Fatalf("fetch %d: NextMaxID(%d) = %d, %v; want %d", i, tc.step, got, err, tc.want)
			}
		}
		var lastMax, step int64
		err = d.Open(t).QueryRowContext(ctx, d.Rebind("SELECT last_max_id, step FROM idforge_segment WHERE name = ?"), "order").Scan(&lastMax, &step)
		if err != nil || lastMax != 1120 || step != 100 {
			t.Errorf("stored row = %d, %d, %v; want last_max_id 1120, step 100", lastMax, step, err)
		}
		// Another store with another start does not reset an existing name.
		again, err := storeOn(t, d.Open(t), sqlstore.Settings{Start: 0}).Segment("order")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := again.NextMaxID(ctx, 1); err != nil || got != 1121 {
			t.Errorf("second distributor: %d, %v; want 1121", got, err)
		}
		for _, step := range []int64{0, -1} {
			if _, err := order.NextMaxID(ctx, step); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Errorf("step %d: err = %v; want ErrInvalidConfig", step, err)
			}
		}
	})
}

func TestSegmentOverflow(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		seg, err := openStore(t, d, sqlstore.Settings{Start: math.MaxInt64 - 10}).Segment("big")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := seg.NextMaxID(ctx, 10); err != nil || got != math.MaxInt64 {
			t.Fatalf("NextMaxID = %d, %v; want MaxInt64", got, err)
		}
		_, err = seg.NextMaxID(ctx, 1)
		if !errors.Is(err, engine.ErrIDOverflow) || !strings.Contains(err.Error(), `"big"`) {
			t.Errorf("past MaxInt64: err = %v; want ErrIDOverflow naming the segment", err)
		}
	})
}

// TestSegmentRoundTrips counts what the driver is asked to do: after the
// first fetch (which creates the row and prepares), every fetch is exactly
// one statement, no transaction, no prepare.
func TestSegmentRoundTrips(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		db, n := countingDB(t, d)
		seg, err := storeOn(t, db).Segment("rt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := seg.NextMaxID(ctx, 100); err != nil {
			t.Fatal(err)
		}
		// Touch every pooled connection a few times so each has prepared.
		db.SetMaxOpenConns(2)
		const fetches = 50
		prepares, statements, begins := n.delta(func() {
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for range fetches / 2 {
						if _, err := seg.NextMaxID(ctx, 100); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
		})
		// A connection opened for the second goroutine prepares once.
		if statements != fetches || begins != 0 || prepares > 1 {
			t.Errorf("%d fetches: %d statements, %d transactions, %d prepares; want %d, 0, at most 1",
				fetches, statements, begins, prepares, fetches)
		}
		prepares, statements, begins = n.delta(func() {
			for range fetches {
				if _, err := seg.NextMaxID(ctx, 1); err != nil {
					t.Fatal(err)
				}
			}
		})
		if statements != fetches || begins != 0 || prepares != 0 {
			t.Errorf("%d warm fetches: %d statements, %d transactions, %d prepares; want %d, 0, 0",
				fetches, statements, begins, prepares, fetches)
		}
	})
}

func TestSegmentStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		db := d.Open(t)
		s := storeOn(t, db)
		seg, err := s.Segment("down")
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = seg.NextMaxID(ctx, 10)
		msg := fmt.Sprint(err)
		if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(msg, `"down"`) ||
			!strings.Contains(msg, s.Dialect().String()) || !strings.Contains(msg, "database is closed") {
			t.Errorf("closed pool: err = %v; want ErrStoreUnavailable naming dialect, segment and cause", err)
		}
	})
}

func TestSegmentClosedStore(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		s := openStore(t, d)
		seg, err := s.Segment("x")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := seg.NextMaxID(context.Background(), 1); !errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrStoreUnavailable) {
			t.Errorf("after Close: err = %v; want ErrClosed only", err)
		}
	})
}
