package sqlstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/segcheck"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// TestFloorOnTheStoresOwnSQLiteFile: a Floor that reads the SQLite file the
// store uses, through the store's own *sql.DB limited to one connection,
// does not deadlock, neither at the first fetch nor at a live process's
// first fetch after a wipe.
func TestFloorOnTheStoresOwnSQLiteFile(t *testing.T) {
	db := testdb.SQLite(t).Open(t)
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a deadlock fails, not hangs
	defer cancel()
	for _, q := range []string{"CREATE TABLE orders (id INTEGER PRIMARY KEY)", "INSERT INTO orders (id) VALUES (300)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	floor := func(ctx context.Context, name string) (int64, error) {
		var maxID int64
		err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM orders").Scan(&maxID)
		return maxID, err
	}
	order := segmentOf(t, storeOn(t, db, sqlstore.Settings{CreateTables: true, Floor: floor}), "order")
	if got, err := order.NextMaxID(ctx, 100); err != nil || got != 400 {
		t.Fatalf("first fetch: %d, %v; want 400", got, err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO orders (id) VALUES (5000)"); err != nil {
		t.Fatal(err)
	}
	emptyTables(t, db)
	got, err := order.NextMaxID(ctx, 100)
	if errors.Is(err, engine.ErrStoreReset) {
		got, err = order.NextMaxID(ctx, 100)
	}
	if err != nil || got != 5100 {
		t.Fatalf("after the wipe: %d, %v; want 5100", got, err)
	}
}

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
		seg := segmentOf(t, openStore(t, d, sqlstore.Settings{Floor: func(context.Context, string) (int64, error) { return 41_000, nil }}), "order")
		if _, err := seg.NextMaxID(ctx, math.MaxInt64); err == nil {
			t.Fatal("an overflowing step succeeded")
		}
		// The raise's commit is lost; the epoch stays.
		if _, err := admin.ExecContext(ctx, d.Rebind("DELETE FROM idforge_segment WHERE name = ?"), "order"); err != nil {
			t.Fatal(err)
		}
		segcheck.ExpectAbove(t, seg, 100, 41_000, "the fetch after a lost raise to Floor's 41,000")
	})
}
