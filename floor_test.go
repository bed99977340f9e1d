package idforge_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/sqlstore"
)

// floorRegistry is a registry on a new SQLite store whose Settings.Floor is
// floor.
func floorRegistry(t *testing.T, floor func(context.Context, string) (int64, error)) *idforge.Registry {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{CreateTables: true, ResetGrace: -1, Floor: floor})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Namespace: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestChainSurfacesFloorErrors: a chain whose Floor fails returns
// ErrSegmentExhausted naming the Floor and the cause, then recovers.
func TestChainSurfacesFloorErrors(t *testing.T) {
	var calls atomic.Int64
	var broken atomic.Bool
	broken.Store(true)
	reg := floorRegistry(t, func(ctx context.Context, name string) (int64, error) {
		calls.Add(1)
		if broken.Load() {
			return 0, errors.New("orders table locked")
		}
		return 500, nil
	})
	defer reg.Close()
	// The chain waits for a range until ctx ends, then names the last
	// fetch's failure.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err := reg.NextID(ctx, "chain", "invoice")
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "orders table locked") || !strings.Contains(err.Error(), "Floor(") {
		t.Errorf("NextID while Floor fails: %v; want ErrSegmentExhausted and ErrStoreUnavailable naming the Floor and the cause", err)
	}
	broken.Store(false)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard: the chain retries on its own
	defer cancel2()
	id, err := reg.NextID(ctx2, "chain", "invoice")
	if err != nil || id <= 500 {
		t.Errorf("after recovery: %d, %v (Floor asked %d times)", id, err, calls.Load())
	}
}
