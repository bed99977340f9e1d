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
// ErrSegmentExhausted naming Settings.Floor and the cause, then recovers.
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
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := reg.NextID(ctx, idforge.KindChain, "invoice")
	t.Logf("first: %v", err)
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "orders table locked") || !strings.Contains(err.Error(), "Settings.Floor") {
		t.Errorf("got %v", err)
	}
	broken.Store(false)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	id, err := reg.NextID(ctx2, idforge.KindChain, "invoice")
	if err != nil || id <= 500 {
		t.Errorf("after recovery: %d, %v (Floor asked %d times)", id, err, calls.Load())
	}
	t.Logf("after recovery: %d (Floor asked %d times)", id, calls.Load())
}

// TestChainFloorBlocksClose: a Floor that ignores ctx and blocks: does
// NextID honour its ctx, and does Close return?
func TestChainFloorBlocksClose(t *testing.T) {
	release := make(chan struct{})
	reg := floorRegistry(t, func(ctx context.Context, name string) (int64, error) {
		<-release
		return 0, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := reg.NextID(ctx, idforge.KindChain, "invoice")
	t.Logf("NextID: %v", err)
	done := make(chan error, 1)
	go func() { done <- reg.Close() }()
	select {
	case err := <-done:
		t.Logf("Close returned: %v", err)
	case <-time.After(2 * time.Second):
		t.Log("Close blocked by a Floor that ignores ctx")
		close(release)
		<-done
		return
	}
	close(release)
}
