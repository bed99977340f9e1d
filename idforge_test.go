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
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/segtest"
)

// Both stores plug into New.
var (
	_ idforge.Store = (*sqlstore.Store)(nil)
	_ idforge.Store = (*redisstore.Store)(nil)
)

func newReg(t *testing.T, s idforge.Settings) *idforge.Registry {
	t.Helper()
	reg, err := idforge.New(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

func TestNewWithoutStore(t *testing.T) {
	ctx := context.Background()
	reg := newReg(t, idforge.Settings{Machine: machine.Manual(7), StateDir: t.TempDir()})
	if reg.Stats().MachineID != 7 {
		t.Fatalf("MachineID() = %d, want 7", reg.Stats().MachineID)
	}
	prev := int64(0)
	for range 10_000 {
		id, err := reg.NextID(ctx, "snowflake", "")
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("id %d after %d: not increasing", id, prev)
		}
		prev = id
	}
	if _, machine, _, err := snowflake.Default.Decode(prev); err != nil || machine != 7 {
		t.Fatalf("decode %d = machine %d, %v; want machine 7", prev, machine, err)
	}
	if _, err := reg.NextID(ctx, "chain", "order"); !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Fatalf("chain without a store: %v, want ErrUnknownGenerator", err)
	}
	reg.Close()
	if reg.Stats().MachineID != -1 {
		t.Fatalf("MachineID() after Close = %d, want -1", reg.Stats().MachineID)
	}
}

// store is a Store on the in-memory distributors of the contract suites.
type store struct {
	machine.Distributor
	seg *segtest.Fake
}

func (s store) Segment(string, ...engine.Floor) (segment.Distributor, error) { return s.seg, nil }

// The registry owns the invariants between its parts: the layout decides
// the lease's machine bits and the lease fences the generator, and no
// setting reaches either; what Settings can express against them is
// refused, naming both fields.
func TestOwnedInvariantsRefused(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	for _, c := range []struct {
		name string
		set  idforge.Settings
		want string
	}{
		{"namespaces", idforge.Settings{Namespace: "a", Instance: machine.Instance{Namespace: "b", ID: "x"}}, `Instance.Namespace "b" contradicts Namespace "a"`},
		{"bad chain step", idforge.Settings{Chain: segment.Settings{Step: -1}}, "Step -1"},
		{"chain Ahead beyond its Fence", idforge.Settings{Chain: segment.Settings{Ahead: 2 * time.Second, Fence: time.Second}}, "Ahead 2s: beyond Fence 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.set
			s.Machine = mem
			reg, err := idforge.New(context.Background(), s)
			if err == nil {
				reg.Close()
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v; want ErrInvalidConfig saying %q", err, c.want)
			}
		})
	}
}

// newSQLiteStore opens a brand-new store on a SQLite file of the test's,
// closed when the test ends.
func newSQLiteStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	return newSQLiteStoreWith(t, sqlstore.Settings{CreateTables: true, Init: true})
}

func newSQLiteStoreWith(t *testing.T, set sqlstore.Settings) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlstore.Open(t.Context(), db, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestLeaseOutlivingStoreResetGraceRefused: on a real store, a lease
// without a reservation (the store's RideThrough negative) would go on issuing for minutes after it lost the
// store, long past the store's 2 s reset grace; New refuses it by name, also
// when the store is wrapped (a state directory; the registry's own counting
// wrapper wraps every store).
func TestLeaseOutlivingStoreResetGraceRefused(t *testing.T) {
	st := newSQLiteStoreWith(t, sqlstore.Settings{CreateTables: true, Init: true, RideThrough: -1})
	for name, s := range map[string]idforge.Settings{
		"store":     {Store: st},
		"state dir": {Store: st, StateDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			reg, err := idforge.New(t.Context(), s)
			if err == nil {
				reg.Close()
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "not less than the store's ResetGrace 2s") {
				t.Fatalf("New = %v; want ErrInvalidConfig naming the store's ResetGrace", err)
			}
		})
	}
}

// TestChainFenceLongerThanReservationRefused: a chain Fence longer than
// the lease's reservation would serve held IDs after snowflake IDs stop,
// past what the store's reset grace covers.
func TestChainFenceLongerThanReservationRefused(t *testing.T) {
	st := newSQLiteStore(t)
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Chain: segment.Settings{Fence: 2 * time.Second}})
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Chain.Fence 2s") || !strings.Contains(err.Error(), "reservation 1s") {
		t.Fatalf("New with a 2 s Fence = %v; want ErrInvalidConfig naming the Fence and the reservation", err)
	}
	reg, err = idforge.New(t.Context(), idforge.Settings{Store: st, Chain: segment.Settings{Fence: time.Second}})
	if err != nil {
		t.Fatalf("New with a Fence of the reservation: %v", err)
	}
	reg.Close()
}

func TestNewRejectsBadLayout(t *testing.T) {
	bad := snowflake.Default
	bad.SequenceBits = 40
	if _, err := idforge.New(context.Background(), idforge.Settings{Layout: bad}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("New with a 41+10+40-bit layout: %v, want ErrInvalidConfig", err)
	}
}

func TestNewRejectsNilStore(t *testing.T) {
	var st *sqlstore.Store
	if _, err := idforge.New(context.Background(), idforge.Settings{Store: st}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("Store: (*sqlstore.Store)(nil): %v, want ErrInvalidConfig", err)
	}
}

// Two registries in one process are two instances: they must not share a
// machine ID, or they would issue the same IDs.
func TestTwoRegistriesGetDifferentMachineIDs(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	a := newReg(t, idforge.Settings{Machine: mem})
	b := newReg(t, idforge.Settings{Machine: mem})
	if a.Stats().MachineID == b.Stats().MachineID {
		t.Fatalf("both registries issue on machine %d", a.Stats().MachineID)
	}
}

// Without a store or a configured machine ID, machine.Default() leaves the
// machine ID to the lock files of the state directory: every registry of
// the process (idforge.Default() used by the GORM plugin plus an
// idforge.New() for sqlx, say) takes the lowest one free, so they never
// share one. A fixed machine ID (IDFORGE_MACHINE_ID) is one registry's at
// a time: the second must refuse to start.
func TestTwoStorelessRegistriesNeverShareAMachineID(t *testing.T) {
	t.Setenv("IDFORGE_MACHINE_ID", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv(leased.StateDirEnv, t.TempDir())
	ctx := context.Background()
	first := newReg(t, idforge.Settings{})
	second := newReg(t, idforge.Settings{})
	if a, b := first.Stats().MachineID, second.Stats().MachineID; a != 0 || b != 1 {
		t.Fatalf("two storeless registries took machine IDs %d and %d; want 0 and 1", a, b)
	}
	// Once the first is closed, its machine ID is free for a new registry.
	first.Close()
	if got := newReg(t, idforge.Settings{}).Stats().MachineID; got != 0 {
		t.Fatalf("after the first closed, a new registry took machine ID %d; want 0", got)
	}

	t.Setenv("IDFORGE_MACHINE_ID", "9")
	fixed := newReg(t, idforge.Settings{})
	again, err := idforge.New(ctx, idforge.Settings{})
	if err == nil {
		again.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "of this process") || !strings.Contains(err.Error(), "machine ID 9") {
		t.Fatalf("second registry on IDFORGE_MACHINE_ID=9: %v, want a clear ErrInvalidConfig", err)
	}
	fixed.Close()
	newReg(t, idforge.Settings{})
}

// resetStore forgets its machine IDs once reset is set, and says so on the
// next heartbeat, as a store that checks its epoch does.
type resetStore struct {
	store
	reset atomic.Bool
}

func (r *resetStore) Guard(ctx context.Context, in machine.Instance, st machine.State) error {
	if r.reset.Load() {
		return engine.ErrStoreReset
	}
	return r.store.Guard(ctx, in, st)
}

// When the lease sees the store was reset, every chain and segment generator
// drops what it holds at once, even one whose caller never fetches again:
// another process may be handed the same ranges.
func TestStoreResetDiscardsChains(t *testing.T) {
	ctx := context.Background()
	st := &resetStore{store: store{Distributor: machinetest.NewMemory(nil), seg: segtest.NewFake(0)}}
	reg := newReg(t, idforge.Settings{Store: st, Lease: machine.Settings{Heartbeat: 100 * time.Millisecond}})
	first, err := reg.NextID(ctx, "chain", "order")
	if err != nil {
		t.Fatal(err)
	}
	firstSingle, err := reg.NextID(ctx, "segment", "invoice") // holds the rest of a 1,000-ID segment
	if err != nil {
		t.Fatal(err)
	}
	chain := func() idforge.GeneratorStats {
		for _, g := range reg.Stats().Generators {
			if g.Kind == "chain" && g.Name == "order" {
				return g
			}
		}
		t.Fatal("Stats() lacks the chain just used")
		return idforge.GeneratorStats{}
	}
	deadline := time.Now().Add(time.Minute) // guards against a hang, measures nothing
	for chain().Ahead == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	held := chain().Ahead
	st.reset.Store(true)
	for chain().Discarded < held && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := chain().Discarded; got < held {
		t.Fatalf("after the reset the chain still holds IDs: discarded %d of %d", got, held)
	}
	reg.Stats() // waits until the discard has gone through every generator
	single, err := reg.NextID(ctx, "segment", "invoice")
	if err != nil {
		t.Fatal(err)
	}
	if single < firstSingle+1000 { // 1000: the default step
		t.Fatalf("after the reset the segment generator served %d from the segment it held (first %d)", single, firstSingle)
	}
	// The next ID comes from a new fetch, above everything held before.
	id, err := reg.NextID(ctx, "chain", "order")
	if err != nil {
		t.Fatal(err)
	}
	if id <= first+held {
		t.Fatalf("after the reset the chain served %d, from a range held before it (first %d, held %d)", id, first, held)
	}
}
