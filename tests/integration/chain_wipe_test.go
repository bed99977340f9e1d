package integration

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// The chain-keyed models of TestChainPartitionedDuringWipe, one per arm:
// each draws from a chain of its own.
type (
	wipeGorm struct {
		ID int64 `gorm:"primaryKey" idgen:"chain,name=wipe_gorm"`
	}
	wipeFence struct {
		ID int64 `gorm:"primaryKey" idgen:"chain,name=wipe_fence"`
	}
	wipeControl struct {
		ID int64 `gorm:"primaryKey" idgen:"chain,name=wipe_control"`
	}
)

// TestChainPartitionedDuringWipe: process A draws chain IDs from a store
// through a fault proxy and writes rows through GORM; the proxy is cut (A
// is cut off, holding ranges), the store is wiped, and process B starts on
// it in the same namespace and writes to the same tables. Per networked
// store, four arms under one cut and one wipe:
//
//   - refuse: a chain B has no Floor for is refused with engine.ErrNoFloor
//     instead of starting at 1 again;
//   - gorm: B, with the Floor the GORM plugin derives from the tagged
//     column and no code of its own, starts above every row A wrote (A
//     stops writing at the cut);
//   - fence: A goes on writing after the cut with Chain.Fence on; no draw
//     begun later than the Fence after A's store last confirmed succeeds
//     (so A stops before B's reset grace ends), A is refused with
//     engine.ErrStoreUnavailable, and no ID is drawn by both, what A
//     served after the cut included;
//   - control: A goes on writing without the Fence: B starts at the Floor
//     it read, inside the range A still serves, so once A has drawn past
//     B's keys the IDs both drew must be found, or the test could not fail.
func TestChainPartitionedDuringWipe(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a store's reset grace; skipped with -short")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "sqlite" {
				t.Skip("a local database file has no connection to cut")
			}
			chainPartitionedDuringWipe(t, b.setup(t))
		})
	}
}

// writer draws IDs through GORM into one table until stopped, recording
// every ID drawn (a failed insert keeps the ID it drew) and every refusal.
type writer struct {
	mu        sync.Mutex
	ids       []int64
	at        []time.Time // when each ID's insert was over
	began     []time.Time // when each ID's draw began
	refused   []error
	refusedAt []time.Time // when each refused draw began
	stop      chan struct{}
	done      chan struct{}
}

func startWriter(db *gorm.DB, newRow func() any, id func(any) int64) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			row := newRow()
			began := time.Now()
			// The key first, outside the insert's transaction: a writer
			// waiting on a fenced chain must not hold the file's write lock.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			err := idplugin.Fill(db.WithContext(ctx), row)
			cancel()
			if err == nil {
				_ = db.Create(row).Error // a key the other process also drew fails here
			}
			w.mu.Lock()
			if n := id(row); n != 0 {
				w.ids, w.at, w.began = append(w.ids, n), append(w.at, time.Now()), append(w.began, began)
			} else if err != nil {
				w.refused, w.refusedAt = append(w.refused, err), append(w.refusedAt, began)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writer) halt() {
	close(w.stop)
	<-w.done
}

// since returns the IDs whose insert was over after t0.
func (w *writer) since(t0 time.Time) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for i, at := range w.at {
		if at.After(t0) {
			out = append(out, w.ids[i])
		}
	}
	return out
}

// begunAfter returns the IDs whose draw began after t0.
func (w *writer) begunAfter(t0 time.Time) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for i, at := range w.began {
		if at.After(t0) {
			out = append(out, w.ids[i])
		}
	}
	return out
}

// refusedAfter reports whether a draw that began after t0 was refused with
// an error wrapping target.
func (w *writer) refusedAfter(t0 time.Time, target error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, err := range w.refused {
		if w.refusedAt[i].After(t0) && errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

func gormOn(t *testing.T, path string, reg *idforge.Registry) *gorm.DB {
	t.Helper()
	// Immediate transactions: two processes' writers queue on the busy
	// timeout instead of failing a deferred transaction's upgrade.
	db, err := gorm.Open(sqlite.Open("file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"),
		&gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sql, err := db.DB(); err == nil {
			sql.Close()
		}
	})
	return db
}

func chainPartitionedDuringWipe(t *testing.T, s *server) {
	ctx := t.Context()
	p := startProxy(t, s.target)
	ns := testdb.UniqueName("wipe-")
	data := filepath.Join(t.TempDir(), "rows.db")
	// A large step: A holds far more IDs than it serves in the test, so the
	// control's A is still serving when B starts.
	chain := segment.Settings{Step: 100_000}
	newReg := func(st idforge.Store, chain segment.Settings) *idforge.Registry {
		reg, err := idforge.New(ctx, idforge.Settings{Store: st, Namespace: ns, Chain: chain, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	regA := newReg(s.open(t, p.Addr()), chain)
	fenced := chain
	fenced.Fence = time.Second // the lease's reservation
	stAF := s.open(t, p.Addr())
	regAF := newReg(stAF, fenced)
	// What A's fence goes by: when A's store last confirmed (any of its
	// operations, the lease's heartbeats included).
	segAF, err := stAF.Segment("wipe_fence")
	if err != nil {
		t.Fatal(err)
	}
	confirmer, ok := segAF.(interface{ Confirmed() time.Time })
	if !ok {
		t.Fatalf("%T does not report when the store last confirmed", segAF)
	}
	// Closed after the proxy is restored (cleanups run last first).
	t.Cleanup(func() { regA.Close(); regAF.Close() })
	t.Cleanup(p.Restore)

	dbA, dbAF := gormOn(t, data, regA), gormOn(t, data, regAF)
	if err := idplugin.Prepare(dbA, &wipeGorm{}, &wipeControl{}); err != nil {
		t.Fatal(err)
	}
	if err := dbA.AutoMigrate(&wipeGorm{}, &wipeFence{}, &wipeControl{}); err != nil {
		t.Fatal(err)
	}
	var before []wipeGorm
	for range 20 {
		row := wipeGorm{}
		if err := dbA.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		before = append(before, row)
	}
	if _, err := regA.NextID(ctx, "chain", "wipe_refuse"); err != nil {
		t.Fatal(err)
	}
	fence := startWriter(dbAF, func() any { return &wipeFence{} }, func(r any) int64 { return r.(*wipeFence).ID })
	control := startWriter(dbA, func() any { return &wipeControl{} }, func(r any) int64 { return r.(*wipeControl).ID })
	eventually(t, "A writing both arms", func() bool { return fence.count() > 10 && control.count() > 10 })

	cut := time.Now()
	p.Cut()
	cutDone := time.Now() // nothing A sends from here on reaches the store
	s.wipe(t)

	// B: a new process on the wiped store, reached directly. Its Open waits
	// the reset grace of the epoch it finds missing.
	regB := newReg(s.open(t, ""), chain)
	t.Cleanup(func() { regB.Close() })
	dbB := gormOn(t, data, regB)

	// refuse: no Floor for this chain.
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = regB.NextID(rctx, "chain", "wipe_refuse")
	cancel()
	if !errors.Is(err, engine.ErrNoFloor) {
		t.Errorf("refuse: B's first chain ID on the wiped store without a Floor: %v; want engine.ErrNoFloor", err)
	}

	// gorm: above every row A wrote.
	maxBefore := slices.MaxFunc(before, func(a, b wipeGorm) int { return int(a.ID - b.ID) }).ID
	for range 20 {
		row := wipeGorm{}
		if err := dbB.Create(&row).Error; err != nil {
			t.Fatalf("gorm: B's insert: %v", err)
		}
		if row.ID <= maxBefore {
			t.Errorf("gorm: B drew %d, not above %d, the largest key A wrote before the cut", row.ID, maxBefore)
		}
	}

	// fence: B writes. control: B draws its keys (as Create would, without
	// inserting: A's rows hold some of them) while the control's A serves
	// on, until A has drawn past them.
	var bFence, bControl []int64
	for range 20 {
		f, c := wipeFence{}, wipeControl{}
		if err := dbB.Create(&f).Error; err != nil {
			t.Fatalf("fence: B's insert: %v", err)
		}
		bFence = append(bFence, f.ID)
		if err := idplugin.Fill(dbB, &c); err != nil {
			t.Fatalf("control: B's key: %v", err)
		}
		bControl = append(bControl, c.ID)
	}
	// The fence arm's claim is about what A does once its fence is over:
	// wait for A to be refused, however late the host lets it try.
	eventually(t, "the fenced A refused with ErrStoreUnavailable after the cut", func() bool {
		return fence.refusedAfter(cutDone, engine.ErrStoreUnavailable)
	})
	fence.halt()
	eventually(t, "the control's A drawing past B's keys", func() bool {
		control.mu.Lock()
		defer control.mu.Unlock()
		return len(control.ids) > 0 && slices.Max(control.ids) >= slices.Max(bControl)
	})
	control.halt()

	shared := func(a, b []int64) (n int) {
		for _, id := range a {
			if slices.Contains(b, id) {
				n++
			}
		}
		return n
	}
	// A's fence ends Fence after the last operation its store confirmed,
	// which was sent before the cut was over; every operation of A's has
	// ended by now (the writer is halted, the rest failed on the cut).
	confirmed := confirmer.Confirmed()
	if confirmed.IsZero() || confirmed.After(cutDone) {
		t.Fatalf("fence: A's store last confirmed at %v, cut at %v: want a confirmation from before the cut",
			confirmed.Format(time.RFC3339Nano), cutDone.Format(time.RFC3339Nano))
	}
	fenceEnd := confirmed.Add(fenced.Fence)
	aFenceAfter, aFencePast := fence.begunAfter(cutDone), fence.begunAfter(fenceEnd)
	fence.mu.Lock()
	aFenceAll, refusals := slices.Clone(fence.ids), slices.Clone(fence.refused)
	fence.mu.Unlock()
	// How many A drew between the cut and the end of its fence is up to
	// the scheduler: logged, not asserted.
	t.Logf("fence: A drew %d IDs, %d begun after the cut, %d begun past its fence; then %d refusals; B drew %d",
		len(aFenceAll), len(aFenceAfter), len(aFencePast), len(refusals), len(bFence))
	if len(aFencePast) != 0 {
		t.Errorf("fence: A drew %d IDs in draws begun after its fence ended (%v after the store last confirmed, at %s): %v",
			len(aFencePast), fenced.Fence, confirmed.Format("15:04:05.000"), aFencePast[:min(5, len(aFencePast))])
	}
	if n := shared(bFence, aFenceAll); n != 0 {
		t.Errorf("fence: %d IDs drawn by both A and B", n)
	}
	aControlAfter := control.since(cut)
	n := shared(bControl, aControlAfter)
	t.Logf("control: A drew %d IDs after the cut; B drew %d; %d drawn by both", len(aControlAfter), len(bControl), n)
	if n == 0 {
		t.Errorf("control: without the Fence no ID was drawn by both A (after the cut) and B: the test could not fail")
	}
}
