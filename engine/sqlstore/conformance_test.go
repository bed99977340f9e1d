package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/chain/chaintest"
	"github.com/idforge/idforge/internal/leased/leasetest"
	"github.com/idforge/idforge/tests/testdb"
)

// TestMachineConformance runs the machine.Distributor contract suite on
// every database, one store per case driven by the case's fake clock.
func TestMachineConformance(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		db := d.Open(t)
		distributors := func(t *testing.T, c clock.Clock) machine.Distributor {
			return storeOn(t, db, sqlstore.Settings{Clock: c})
		}
		machinetest.Run(t, distributors)
		leasetest.Run(t, distributors)
	})
}

// TestSegmentConformance runs the segment.Distributor contract suite on
// every database; each distributor has a pool and store of its own, as
// separate instances would.
func TestSegmentConformance(t *testing.T) {
	const start = 1_000_000
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		segments := func(t *testing.T, name string) segment.Distributor {
			return segmentOf(t, storeOn(t, d.Open(t), sqlstore.Settings{Start: start}), name)
		}
		segmenttest.Run(t, segmenttest.Suite{Segments: segments, Start: start})
		chaintest.Run(t, segments, start)
	})
}

// TestFloorAndRestoreConformance runs the Settings.Floor and restore parts
// of the suite on every database: a wipe empties the three tables, as a
// restore of an empty backup would; a snapshot copies them into tables of
// their own and copies them back; the Admin is the operator's commands on
// a store value opened for them, as `idforge store` opens one.
func TestFloorAndRestoreConformance(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		admin := d.Open(t)
		segmenttest.Run(t, segmenttest.Suite{
			Open:     openWithFloor(d, sqlstore.Settings{}),
			Wipe:     wipeTables(admin),
			Snapshot: func(t *testing.T) func(t *testing.T) { return snapshotTables(t, admin) },
			Admin:    func(t *testing.T) machine.Admin { return sqlstore.AdminOf(openStore(t, d)) },
			Machines: func(t *testing.T) machine.Distributor { return openStore(t, d) },
		})
	})
}

// TestFloorRace runs the suite's wipe race on the networked databases (a
// SQLite file takes one Store per process).
func TestFloorRace(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		if d.Name == "sqlite" {
			t.Skip("one Store per SQLite file")
		}
		segmenttest.Run(t, segmenttest.Suite{
			RaceOpen: openWithFloor(d, sqlstore.Settings{ResetGrace: 300 * time.Millisecond}),
			Wipe:     wipeTables(d.Open(t)),
		})
	})
}

// openWithFloor opens, for each call, a Store on a pool of its own on d with
// the given Floor and settings, as a new process would.
func openWithFloor(d testdb.DB, set sqlstore.Settings) func(*testing.T, func(context.Context, string) (int64, error)) func(string) segment.Distributor {
	return func(t *testing.T, floor func(context.Context, string) (int64, error)) func(string) segment.Distributor {
		set.Floor = floor
		s := storeOn(t, d.Open(t), set)
		return func(name string) segment.Distributor { return segmentOf(t, s, name) }
	}
}

// wipeTables empties the store's tables on admin, or with epochOnly its
// epoch table alone.
func wipeTables(admin *sql.DB) func(t *testing.T, epochOnly bool) {
	return func(t *testing.T, epochOnly bool) {
		if epochOnly {
			emptyTables(t, admin, "idforge_meta")
			return
		}
		emptyTables(t, admin)
	}
}
