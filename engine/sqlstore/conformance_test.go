package sqlstore_test

import (
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
		segmenttest.Run(t, segments, segmenttest.ExpectStart(start))
		chaintest.Run(t, segments, start)
	})
}

// TestFloorConformance runs the Settings.Floor suite on every database; a
// wipe empties the three tables, as a restore of an empty backup would.
func TestFloorConformance(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		admin := d.Open(t)
		segmenttest.RunFloor(t, openWithFloor(d, sqlstore.Settings{}), func(t *testing.T) { emptyTables(t, admin) })
	})
}

// TestFloorRace runs segmenttest.RunFloorRace on the networked databases
// (a SQLite file takes one Store per process).
func TestFloorRace(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		if d.Name == "sqlite" {
			t.Skip("one Store per SQLite file")
		}
		admin := d.Open(t)
		segmenttest.RunFloorRace(t, openWithFloor(d, sqlstore.Settings{ResetGrace: 300 * time.Millisecond}), func(t *testing.T, epochOnly bool) {
			if epochOnly {
				emptyTables(t, admin, "idforge_meta")
				return
			}
			emptyTables(t, admin)
		})
	})
}

// openWithFloor opens, for each call, a Store on a pool of its own on d with
// the given Floor and settings, as a new process would.
func openWithFloor(d testdb.DB, set sqlstore.Settings) segmenttest.OpenWithFloor {
	return func(t *testing.T, floor segmenttest.FloorFunc) func(string) segment.Distributor {
		set.Floor = floor
		s := storeOn(t, d.Open(t), set)
		return func(name string) segment.Distributor { return segmentOf(t, s, name) }
	}
}

// TestRestoreConformance runs the restore suite on every database: a
// snapshot copies the three tables into tables of its own and copies them
// back, and Declare and Raise are the store's Admin commands, each on a
// store value opened for it, as `idforge store` opens one.
func TestRestoreConformance(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		admin := d.Open(t)
		segmenttest.RunRestore(t, openWithFloor(d, sqlstore.Settings{}), segmenttest.Restore{
			Snapshot:  func(t *testing.T) func(t *testing.T) { return snapshotTables(t, admin) },
			DropEpoch: func(t *testing.T) { emptyTables(t, admin, "idforge_meta") },
			Declare: func(t *testing.T) {
				if err := sqlstore.AdminOf(openStore(t, d)).Restored(t.Context()); err != nil {
					t.Fatal(err)
				}
			},
			Raise: func(t *testing.T, name string, to int64) {
				if _, err := sqlstore.AdminOf(openStore(t, d)).RaiseCounter(t.Context(), name, to); err != nil {
					t.Fatal(err)
				}
			},
			Machines: func(t *testing.T) machine.Distributor { return openStore(t, d) },
		})
	})
}
