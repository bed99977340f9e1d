package segmenttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// Suite is what a store under test gives [Run]. Segments is the contract
// every [segment.Distributor] keeps; the other parts are a store's (a
// Floor, an epoch, an operator's commands) and run when the fields they
// need are set: the Floor checks with Open and Wipe, the wipe race with
// RaceOpen and Wipe, the restore checks with Open, Wipe, Snapshot, Admin
// and Machines. The store Open and RaceOpen open is empty when Run starts;
// Run wipes it before every part but the first that needs it empty.
type Suite struct {
	// Segments returns a distributor for the named sequence; it may be
	// called several times with one name, and distributors for the same
	// name must share the sequence, as instances sharing a store do. Every
	// name Run asks for is new: the sequence must not exist yet in the
	// store.
	Segments func(t *testing.T, name string) segment.Distributor
	// Start is where a fresh sequence of Segments starts: the store under
	// test was built with this start (default 0).
	Start int64
	// Open opens a new store value, as a newly started process would, with
	// its Floor set to floor, Start 0 and no reset grace to wait, and
	// returns its distributor of the named sequence.
	Open func(t *testing.T, floor func(ctx context.Context, name string) (int64, error)) func(name string) segment.Distributor
	// RaceOpen is Open with a short reset grace (300 ms), so that racing
	// fetches land between wipes. Nil skips the race, for a store that
	// takes one store value per database (a SQLite file).
	RaceOpen func(t *testing.T, floor func(ctx context.Context, name string) (int64, error)) func(name string) segment.Distributor
	// Wipe empties the store behind the backs of its open store values, as
	// a lost or recreated store would be (every counter and the epoch
	// gone); with epochOnly it deletes the epoch alone and keeps the
	// counters, as the emptied idforge_meta of an older restore procedure
	// or a backup restored without it does.
	Wipe func(t *testing.T, epochOnly bool)
	// Snapshot copies the store's whole state, its epoch included, and
	// returns a function that puts the copy back: a backup restored as it
	// was taken.
	Snapshot func(t *testing.T) (restore func(t *testing.T))
	// Admin opens the store's operator commands, as `idforge store` does,
	// closing them when t ends: the restore checks declare the store
	// restored and raise counters with them.
	Admin func(t *testing.T) machine.Admin
	// Machines opens the store's machine.Distributor, as a new process
	// would.
	Machines func(t *testing.T) machine.Distributor
}

// names keeps sequence names unique across Run calls sharing a store.
var names atomic.Int64

// contract checks Segments; name makes a sequence name new to the store.
type contract struct {
	start int64
	new   func(t *testing.T, name string) segment.Distributor
}

func (s *contract) name(label string) string {
	return fmt.Sprintf("st-%s-%s-%d", label, strconv.FormatInt(time.Now().UnixNano(), 36), names.Add(1))
}

// Run checks a store against the contracts of the parts s gives, one
// subtest per part ("Contract", "Floor", "FloorRace", "Restore"); a part
// whose fields are nil is skipped.
//
// The contract of Segments:
//   - A fresh name starts at Start: its first range for step s is
//     (Start, Start+s], and each call continues where the previous one
//     ended.
//   - Ranges handed to concurrent callers (16 goroutines × 200 calls with
//     varied steps, through several distributors for the name) never
//     overlap and cover the sequence contiguously.
//   - Names are independent sequences.
//   - Steps beyond 32 bits work.
//   - A step <= 0 fails with an error wrapping engine.ErrInvalidConfig and
//     takes nothing from the sequence.
//   - A cancelled ctx fails with an error wrapping context.Canceled, and
//     later ranges still never overlap earlier ones.
//
// The Floor part (the store's Settings.Floor, against the real store;
// store values from Open):
//   - A new sequence starts at the floor (rows written before idforge, a
//     table moved from AUTO_INCREMENT), and the floor is read once per store
//     value and name, not on every fetch.
//   - After a wipe, a process that never used the sequence (every process
//     that did is gone, so no one can report what was handed out) starts it
//     above the IDs the data holds, not at Start.
//   - After a wipe, a live process lifts the counter to the data's floor
//     too, when other processes wrote IDs it never saw.
//   - Store values whose floors answer differently, the lower first: the
//     counter ends above the larger answer.
//   - A floor that fails while a live process re-seeds after a wipe does
//     not keep that process's own floor from the store: a new process then
//     starts above what the live one handed out, committed or not.
//   - A floor near the largest int64 ends in engine.ErrIDOverflow.
//   - A failing or panicking floor fails the fetch with
//     engine.ErrStoreUnavailable, a negative one with
//     engine.ErrInvalidConfig, each naming the Floor.
//
// The FloorRace part races first fetches against wipes: three store values
// from RaceOpen, three goroutines each with steps of their own, fetch one
// name while Wipe empties the store four times (then, in a second round,
// deletes only its epoch four times), 0.7 s apart. Floor answers the
// largest maximum handed out so far, as a table holding every ID would. No
// two ranges handed out may overlap; fetches may fail with
// engine.ErrStoreReset or engine.ErrStoreUnavailable meanwhile, nothing
// else.
//
// The Restore part checks what a store does when its counters may be older
// than what was handed out; the sequences are new to the store:
//   - After the Admin's Restored, a counter is served only above a Floor,
//     and then above both the Floor's answer and the counter (the restored
//     value is a lower bound, never the answer alone); a sequence no Floor
//     knows is refused with engine.ErrNoFloor until the Admin raises it.
//   - A live store value of the old epoch sees engine.ErrStoreReset after
//     Restored, then goes on above what it got.
//   - A store value that finds the epoch deleted (Wipe with epochOnly)
//     while the counters stay marks them all untrusted: the same refusal
//     without a Floor, and the counter still a lower bound when the Floor
//     answers less.
//   - A store put back from a Snapshot with its epoch (no Restored) under a
//     live store value whose floor is above a counter: that fetch sees
//     engine.ErrStoreReset, and every other counter of the store becomes
//     untrusted too, so a sequence used after the snapshot by a process now
//     gone is refused, not handed out again from the snapshot's counter.
//   - The same when a live store value's heartbeat finds its machine ID
//     (from Machines), claimed after the snapshot, gone from the store (IDs
//     are never deleted).
func Run(t *testing.T, s Suite) {
	t.Helper()
	if s.Segments != nil {
		c := &contract{start: s.Start, new: s.Segments}
		t.Run("Contract", func(t *testing.T) {
			t.Run("FirstRange", c.firstRange)
			t.Run("Concurrent", c.concurrent)
			t.Run("IndependentNames", c.independentNames)
			t.Run("LargeStep", c.largeStep)
			t.Run("InvalidStep", c.invalidStep)
			t.Run("CancelledContext", c.cancelled)
		})
	}
	if s.Wipe == nil {
		return
	}
	used := false // whether a part ran on the store: the next wipes it first
	part := func(name string, run func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if used {
				s.Wipe(t, false)
			}
			used = true
			run(t)
		})
	}
	if s.Open != nil {
		part("Floor", func(t *testing.T) { checkFloor(t, s.Open, s.Wipe) })
	}
	if s.RaceOpen != nil {
		part("FloorRace", func(t *testing.T) { checkFloorRace(t, s.RaceOpen, s.Wipe) })
	}
	if s.Open != nil && s.Snapshot != nil && s.Admin != nil && s.Machines != nil {
		part("Restore", func(t *testing.T) { checkRestore(t, s) })
	}
}

// testContext is the context of a case: cancelled when it ends, with no
// deadline of its own. A store on a loaded machine (two cores, the race
// detector, SQLite committing every fetch) may take minutes for the
// concurrent case; the suite asserts no wall-clock time, `go test -timeout`
// bounds a hang.
func testContext(t *testing.T) context.Context { return t.Context() }

// expect calls d.NextMaxID(step) and fails unless it returns want.
func expect(t *testing.T, ctx context.Context, d segment.Distributor, step, want int64) {
	t.Helper()
	got, err := d.NextMaxID(ctx, step)
	if err != nil {
		t.Fatalf("NextMaxID(%d): %v", step, err)
	}
	if got != want {
		t.Fatalf("NextMaxID(%d) = %d, want %d", step, got, want)
	}
}

func (s *contract) firstRange(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("first"))
	expect(t, ctx, d, 7, s.start+7)
	expect(t, ctx, d, 5, s.start+12)
	expect(t, ctx, d, 1, s.start+13)
}

func (s *contract) concurrent(t *testing.T) {
	const goroutines, calls = 16, 200
	ctx := testContext(t)
	name := s.name("concurrent")
	// Four distributors for the name, as four instances would have.
	ds := make([]segment.Distributor, 4)
	for i := range ds {
		ds[i] = s.new(t, name)
	}
	type rng struct{ lo, hi int64 }
	got := make([][]rng, goroutines)
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			d := ds[g%len(ds)]
			for i := range calls {
				step := int64(1 + (g*31+i*7)%64)
				max, err := d.NextMaxID(ctx, step)
				if err != nil {
					t.Errorf("goroutine %d call %d: NextMaxID(%d): %v", g, i, step, err)
					return
				}
				got[g] = append(got[g], rng{max - step, max})
				total.Add(step)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	all := slices.Concat(got...)
	slices.SortFunc(all, func(a, b rng) int { return cmp.Compare(a.hi, b.hi) })
	prev := s.start
	for _, r := range all {
		if r.lo != prev {
			t.Fatalf("range (%d, %d] follows a range ending at %d: ranges overlap or leave a gap", r.lo, r.hi, prev)
		}
		prev = r.hi
	}
	if want := s.start + total.Load(); prev != want {
		t.Fatalf("ranges end at %d, want start %d + %d IDs = %d", prev, s.start, total.Load(), want)
	}
}

func (s *contract) independentNames(t *testing.T) {
	ctx := testContext(t)
	a, b := s.new(t, s.name("a")), s.new(t, s.name("b"))
	expect(t, ctx, a, 3, s.start+3)
	expect(t, ctx, a, 3, s.start+6)
	expect(t, ctx, b, 4, s.start+4)
	expect(t, ctx, a, 3, s.start+9)
	expect(t, ctx, b, 4, s.start+8)
}

func (s *contract) largeStep(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("large"))
	const big = 1 << 40
	expect(t, ctx, d, big, s.start+big)
	expect(t, ctx, d, 1, s.start+big+1)
}

func (s *contract) invalidStep(t *testing.T) {
	ctx := testContext(t)
	d := s.new(t, s.name("invalid"))
	expect(t, ctx, d, 2, s.start+2)
	for _, step := range []int64{0, -1, -1000} {
		if max, err := d.NextMaxID(ctx, step); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("NextMaxID(%d) = %d, %v; want an error wrapping engine.ErrInvalidConfig", step, max, err)
		}
	}
	expect(t, ctx, d, 2, s.start+4)
}

func (s *contract) cancelled(t *testing.T) {
	d := s.new(t, s.name("cancel"))
	expect(t, testContext(t), d, 4, s.start+4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if max, err := d.NextMaxID(ctx, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("NextMaxID with a cancelled ctx = %d, %v; want an error wrapping context.Canceled", max, err)
	}
	max, err := d.NextMaxID(testContext(t), 4)
	if err != nil {
		t.Fatalf("NextMaxID after the cancelled call: %v", err)
	}
	if max-4 < s.start+4 {
		t.Fatalf("range (%d, %d] after the cancelled call overlaps (%d, %d]", max-4, max, s.start, s.start+4)
	}
}
