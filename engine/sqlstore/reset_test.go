package sqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// waitedGrace fails the test unless clock c (a fake that advances when
// slept on) has passed the store's epoch creation plus the default grace.
func waitedGrace(t *testing.T, what string, s *sqlstore.Store, c *clocktest.Fake) {
	t.Helper()
	ms, _, _ := strings.Cut(s.Epoch(), ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("epoch %q does not start with its creation time", s.Epoch())
	}
	readyAt := time.UnixMilli(n).Add(sqlstore.DefaultResetGrace)
	if c.Sleeps() == 0 || c.Now().Before(readyAt) {
		t.Fatalf("%s: clock at %v after %d sleeps; want it slept past the epoch's creation + grace, %v", what, c.Now(), c.Sleeps(), readyAt)
	}
}

// TestTablesEmptiedIsAReset empties the three tables under a store that
// used them (as a restore of an empty backup or a careless TRUNCATE would),
// then drops and recreates them: each time the old store's next operation
// fails with ErrStoreReset naming the store, a store opened after the wipe
// waits the grace, and segments come back above every range the old store
// held.
func TestTablesEmptiedIsAReset(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			admin := d.Open(t)
			clkA := clocktest.NewFake(time.Now())
			a, err := sqlstore.Open(ctx, d.Open(t), sqlstore.Settings{Clock: clkA, CreateTables: true, Init: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			if clkA.Sleeps() != 0 || !sqlstore.AdminOf(a).BrandNew() {
				t.Fatalf("Open with Init on new tables: %d sleeps, brand-new %v; want no wait, brand-new", clkA.Sleeps(), sqlstore.AdminOf(a).BrandNew())
			}

			for round, wipe := range []func() error{
				func() error { emptyTables(t, admin); return nil }, // emptied
				func() error { // dropped; the next Open recreates them
					for _, table := range []string{"idforge_segment", "idforge_machine", "idforge_meta"} {
						if _, err := admin.ExecContext(ctx, "DROP TABLE "+table); err != nil {
							return err
						}
					}
					return nil
				},
			} {
				old := a.Epoch()
				inst := machine.Instance{Namespace: "svc", ID: "a" + strconv.Itoa(round)}
				st := distribute(t, a, inst, 10)
				order, err := a.Segment("order")
				if err != nil {
					t.Fatal(err)
				}
				floor, err := order.NextMaxID(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				if err := wipe(); err != nil {
					t.Fatalf("round %d: wiping: %v", round, err)
				}
				clkB := clocktest.NewFake(clkA.Now())
				b, err := sqlstore.Open(ctx, d.Open(t), sqlstore.Settings{Clock: clkB, CreateTables: true})
				if err != nil {
					t.Fatalf("round %d: Open after the wipe: %v", round, err)
				}
				t.Cleanup(func() { b.Close() })
				waitedGrace(t, "Open after the wipe", b, clkB)
				if sqlstore.AdminOf(b).BrandNew() {
					t.Fatalf("round %d: a store found wiped counts as brand-new", round)
				}

				err = a.Guard(ctx, inst, st)
				if !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), "sqlstore ("+a.Dialect().String()+")") ||
					!strings.Contains(err.Error(), old) {
					t.Fatalf("round %d: heartbeat after the wipe: %v; want ErrStoreReset naming the store and the old epoch", round, err)
				}
				if a.Epoch() != b.Epoch() {
					t.Fatalf("round %d: the old store adopted %q, the tables hold %q", round, a.Epoch(), b.Epoch())
				}
				got, err := order.NextMaxID(ctx, 100)
				if err != nil || got <= floor {
					t.Fatalf("round %d: old store's fetch after the reset: %d, %v; want > %d", round, got, err, floor)
				}
				bOrder, err := b.Segment("order")
				if err != nil {
					t.Fatal(err)
				}
				if got, err := bOrder.NextMaxID(ctx, 100); err != nil || got <= floor+100 {
					t.Fatalf("round %d: new store's fetch: %d, %v; want above the old store's ranges (> %d)", round, got, err, floor+100)
				}
				if err := a.Guard(ctx, inst, st); !errors.Is(err, engine.ErrMachineIDLost) {
					t.Fatalf("round %d: second heartbeat of the old lease: %v; want ErrMachineIDLost", round, err)
				}
			}
		})
	}
}

// TestFirstFetchAfterWipeFails: the first fetch to see a wipe fails with
// ErrStoreReset instead of handing out a range of the new epoch; the next
// one waits the grace and starts at the floor.
func TestFirstFetchAfterWipeFails(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		clk := clocktest.NewFake(time.Now())
		s, err := sqlstore.Open(ctx, d.Open(t), sqlstore.Settings{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		order, err := s.Segment("order")
		if err != nil {
			t.Fatal(err)
		}
		floor, err := order.NextMaxID(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Open(t).ExecContext(ctx, "DELETE FROM idforge_meta"); err != nil {
			t.Fatal(err)
		}
		if _, err := order.NextMaxID(ctx, 10); !errors.Is(err, engine.ErrStoreReset) {
			t.Fatalf("first fetch after the wipe: %v; want ErrStoreReset", err)
		}
		sleeps := clk.Sleeps()
		if got, err := order.NextMaxID(ctx, 10); err != nil || got != floor+10 {
			t.Fatalf("fetch after the reset: %d, %v; want %d", got, err, floor+10)
		}
		if clk.Sleeps() == sleeps {
			t.Fatal("the fetch after the reset did not wait the grace")
		}
	})
}

// TestCounterWentBackIsAReset: a database restored from a backup (or failed
// over to a replica that lacked the last commits) keeps its epoch but its
// counters went back. The first store whose floor is above a counter
// replaces the epoch, so every store sees a reset, and nothing is handed
// out below what was handed out before. A lost row is the same.
func TestCounterWentBackIsAReset(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		clkA, clkB := clocktest.NewFake(time.Now()), clocktest.NewFake(time.Now())
		// The default grace: the fetch after the reset must wait it.
		a := storeOn(t, d.Open(t), sqlstore.Settings{Clock: clkA, ResetGrace: sqlstore.DefaultResetGrace})
		b := storeOn(t, d.Open(t), sqlstore.Settings{Clock: clkB, ResetGrace: sqlstore.DefaultResetGrace})
		admin := d.Open(t)
		order, err := a.Segment("order")
		if err != nil {
			t.Fatal(err)
		}
		for i, restore := range []string{
			"UPDATE idforge_segment SET last_max_id = 5 WHERE name = 'order'",
			"DELETE FROM idforge_segment WHERE name = 'order'",
		} {
			var floor int64
			for range 2 {
				if floor, err = order.NextMaxID(ctx, 100); err != nil {
					t.Fatal(err)
				}
			}
			old := a.Epoch()
			if _, err := admin.ExecContext(ctx, restore); err != nil {
				t.Fatal(err)
			}
			_, err := order.NextMaxID(ctx, 100)
			if !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), "lost committed writes") {
				t.Fatalf("%d: fetch after the counter went back: %v; want ErrStoreReset saying the store lost writes", i, err)
			}
			if a.Epoch() == old {
				t.Fatalf("%d: the epoch was not replaced", i)
			}
			other, err := b.Segment("other")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.NextMaxID(ctx, 1); !errors.Is(err, engine.ErrStoreReset) {
				t.Fatalf("%d: another store after the epoch was replaced: %v; want ErrStoreReset", i, err)
			}
			sleeps := clkA.Sleeps()
			if got, err := order.NextMaxID(ctx, 100); err != nil || got != floor+100 {
				t.Fatalf("%d: fetch after the reset: %d, %v; want %d, above the floor %d", i, got, err, floor+100, floor)
			}
			if clkA.Sleeps() == sleeps {
				t.Fatalf("%d: the fetch after the reset did not wait the grace", i)
			}
		}
	})
}
