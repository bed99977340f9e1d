package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/uuidv7"
)

// memStore is an in-memory store: machinetest.Memory and a segmenttest.Fake per name.
type memStore struct {
	*machinetest.Memory
	mu   sync.Mutex
	seqs map[string]*segmenttest.Fake
}

func newMemStore() *memStore {
	return &memStore{Memory: machinetest.NewMemory(clock.System), seqs: map[string]*segmenttest.Fake{}}
}

func (m *memStore) Segment(name string, _ ...engine.Floor) (segment.Distributor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.seqs[name]
	if !ok {
		f = segmenttest.NewFake()
		m.seqs[name] = f
	}
	return f, nil
}

// value reads one metric of a gathered registry: a counter's or gauge's
// value, or a histogram's sample count.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func TestMetricsChangeAsIDsAreDrawn(t *testing.T) {
	ctx := context.Background()
	col := New(Options{})
	preg := prometheus.NewRegistry()
	preg.MustRegister(col)
	st := col.Store(newMemStore())

	// A lease and a snowflake generator on it, as the root builds them.
	lease, err := machine.Acquire(ctx, st, machine.Instance{Namespace: "svc", ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := snowflake.New(lease.MachineID(), snowflake.WithFence(lease))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.Register("snowflake", "", gen)
	reg.RegisterFactory("chain", func(ctx context.Context, name string) (engine.Generator, error) {
		d, err := st.Segment(name)
		if err != nil {
			return nil, err
		}
		return segment.NewChain(d, segment.WithName(name), segment.WithStep(100))
	})
	defer reg.Close()
	p := col.Provider(reg)

	if v, _ := value(t, preg, "idforge_lease_machine_id", nil); v != 0 {
		t.Fatalf("lease_machine_id = %v, want 0", v)
	}
	if _, ok := value(t, preg, "idforge_lease_heartbeat_age_seconds", nil); !ok {
		t.Fatal("no lease_heartbeat_age_seconds after Distribute")
	}

	sf, _ := p.Generator(ctx, "snowflake", "")
	ch, _ := p.Generator(ctx, "chain", "order")
	for range 250 {
		if _, err := sf.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, labels := range map[string]map[string]string{
		"idforge_ids_issued_total": {"kind": "snowflake", "name": ""},
	} {
		if v, _ := value(t, preg, name, labels); v != 250 {
			t.Errorf("%s%v = %v, want 250", name, labels, v)
		}
	}
	if v, _ := value(t, preg, "idforge_ids_issued_total", map[string]string{"kind": "chain", "name": "order"}); v != 250 {
		t.Errorf("chain issued = %v, want 250", v)
	}
	fetches, _ := value(t, preg, "idforge_chain_fetches_total", map[string]string{"name": "order"})
	if fetches < 1 {
		t.Errorf("chain fetches = %v, want >= 1", fetches)
	}
	if v, _ := value(t, preg, "idforge_chain_step", map[string]string{"name": "order"}); v != 100 {
		t.Errorf("chain step = %v", v)
	}
	if _, ok := value(t, preg, "idforge_chain_head_gap", map[string]string{"name": "order"}); !ok {
		t.Error("no chain_head_gap")
	}
	// The prefetch worker may be fetching meanwhile: a fetch is timed when
	// the store answers and counted just after, so between two readings of
	// the count the samples are at least the first and at most one more
	// than the second.
	samples, _ := value(t, preg, "idforge_store_request_duration_seconds", map[string]string{"op": "next_max_id", "name": "order"})
	after, _ := value(t, preg, "idforge_chain_fetches_total", map[string]string{"name": "order"})
	if samples < fetches || samples > after+1 {
		t.Errorf("store latency samples = %v, want one per fetch (%v to %v fetches)", samples, fetches, after)
	}
	if v, _ := value(t, preg, "idforge_store_request_duration_seconds", map[string]string{"op": "distribute"}); v != 1 {
		t.Errorf("distribute samples = %v, want 1", v)
	}

	// Reverting gives the machine ID back.
	lease.Close()
	if v, _ := value(t, preg, "idforge_lease_machine_id", nil); v != -1 {
		t.Errorf("lease_machine_id after Close = %v, want -1", v)
	}
	snap := col.Snapshot()
	if len(snap.Generators) != 2 || snap.Generators[0].Kind != "chain" || snap.Generators[0].Chain == nil ||
		len(snap.Recent) == 0 || len(snap.RecentLease) == 0 {
		t.Fatalf("snapshot: %+v", snap)
	}
	if snap.Recent[0].Op != "next_max_id" || snap.RecentLease[0].Op != "revert" {
		t.Errorf("newest calls %q and %q, want next_max_id and revert", snap.Recent[0].Op, snap.RecentLease[0].Op)
	}
	if n := testutil.CollectAndCount(col); n == 0 {
		t.Error("no metrics collected")
	}
	if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP idforge_lease_lost_total Times the machine ID was found taken over by another instance.
# TYPE idforge_lease_lost_total counter
idforge_lease_lost_total 0
`), "idforge_lease_lost_total"); err != nil {
		t.Error(err)
	}
}

func TestErrorsAndClockBackwards(t *testing.T) {
	ctx := context.Background()
	col := New(Options{})
	preg := prometheus.NewRegistry()
	preg.MustRegister(col)

	fails := col.Generator("chain", "down", engine.GeneratorFunc(func(context.Context) (int64, error) {
		return 0, errors.Join(errors.New("fetch"), engine.ErrStoreUnavailable)
	}))
	fails.NextID(ctx)
	fails.NextID(ctx)
	if v, _ := value(t, preg, "idforge_id_errors_total", map[string]string{"name": "down", "reason": "store_unavailable"}); v != 2 {
		t.Errorf("errors = %v, want 2", v)
	}

	// A snowflake generator on a clock that steps back 20 ms waits it out
	// (within its MaxBackwards); one that steps back a minute refuses.
	fake := clock.NewFake(time.Now())
	g, err := snowflake.New(1, snowflake.WithClock(fake), snowflake.WithMaxBackwards(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sf := col.Generator("snowflake", "", g)
	if _, err := sf.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	fake.StepBack(20 * time.Millisecond)
	if _, err := sf.NextID(ctx); err != nil {
		t.Fatalf("20 ms back: %v", err)
	}
	if v, _ := value(t, preg, "idforge_clock_backwards_waits_total", map[string]string{"kind": "snowflake"}); v != 1 {
		t.Errorf("waits = %v, want 1", v)
	}
	fake.StepBack(time.Minute)
	if _, err := sf.NextID(ctx); !errors.Is(err, engine.ErrClockBackwards) {
		t.Fatalf("a minute back: %v", err)
	}
	if v, _ := value(t, preg, "idforge_clock_backwards_refusals_total", map[string]string{"kind": "snowflake"}); v != 1 {
		t.Errorf("refusals = %v, want 1", v)
	}
	if v, _ := value(t, preg, "idforge_id_errors_total", map[string]string{"kind": "snowflake", "reason": "clock_backwards"}); v != 1 {
		t.Errorf("snowflake clock errors = %v, want 1", v)
	}
	// A generator the provider hands out in its place keeps the count.
	g2, err := snowflake.New(2)
	if err != nil {
		t.Fatal(err)
	}
	col.Generator("snowflake", "", g2)
	if v, _ := value(t, preg, "idforge_clock_backwards_waits_total", map[string]string{"kind": "snowflake"}); v != 1 {
		t.Errorf("waits after the generator was replaced = %v, want 1", v)
	}
}

func TestBatchCountsOnce(t *testing.T) {
	col := New(Options{})
	g, _ := snowflake.New(3)
	w := col.Generator("snowflake", "", g).(interface {
		NextIDs(context.Context, []int64) (int, error)
	})
	dst := make([]int64, 1000)
	if n, err := w.NextIDs(context.Background(), dst); n != 1000 || err != nil {
		t.Fatalf("NextIDs: %d, %v", n, err)
	}
	for i := 1; i < len(dst); i++ {
		if dst[i] <= dst[i-1] {
			t.Fatalf("IDs not increasing at %d", i)
		}
	}
	if s := col.Snapshot(); s.Generators[0].Issued != 1000 {
		t.Fatalf("issued %d, want 1000", s.Generators[0].Issued)
	}
}

// Chains from Options.Chains are reported without going through Provider.
func TestOptionsChains(t *testing.T) {
	ch, err := segment.NewChain(segmenttest.NewFake(), segment.WithStep(10))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for range 25 {
		ch.NextID(context.Background())
	}
	col := New(Options{Chains: func() map[string]*segment.Chain { return map[string]*segment.Chain{"invoice": ch} }})
	preg := prometheus.NewRegistry()
	preg.MustRegister(col)
	if v, _ := value(t, preg, "idforge_ids_issued_total", map[string]string{"kind": "chain", "name": "invoice"}); v != 25 {
		t.Errorf("issued = %v, want 25", v)
	}
	if v, _ := value(t, preg, "idforge_chain_step", map[string]string{"name": "invoice"}); v != 10 {
		t.Errorf("step = %v, want 10", v)
	}
	// Watch replaces the options' source.
	col.Watch(source{id: 9, chains: map[string]*segment.Chain{"other": ch}})
	if v, _ := value(t, preg, "idforge_lease_machine_id", nil); v != 9 {
		t.Errorf("watched machine ID = %v, want 9", v)
	}
	if _, ok := value(t, preg, "idforge_chain_step", map[string]string{"name": "other"}); !ok {
		t.Error("watched chain not reported")
	}
	col.Watch(source{id: 9, chains: map[string]*segment.Chain{"invoice": ch}})
	// Drawn through the provider too: reported once.
	col.Generator("chain", "invoice", ch).NextID(context.Background())
	if n := len(col.Snapshot().Generators); n != 1 {
		t.Errorf("%d generators, want 1", n)
	}
}

type source struct {
	id     int64
	chains map[string]*segment.Chain
}

func (s source) MachineID() int64                  { return s.id }
func (s source) Chains() map[string]*segment.Chain { return s.chains }

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		engine.ErrMachineIDLost:               "machine_id_lost",
		context.Canceled:                      "canceled",
		errors.New("x"):                       "other",
		errors.Join(engine.ErrStoreReset):     "store_reset",
		errors.Join(engine.ErrClockBackwards): "clock_backwards",
		errors.Join(engine.ErrInstanceInUse):  "instance_in_use",
		errors.Join(engine.ErrClockSkew):      "clock_skew",
		// A reset ends the lease, which reports it as a lost machine ID too.
		fmt.Errorf("%w: %w", engine.ErrMachineIDLost, engine.ErrStoreReset): "store_reset",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// clockStore is a store with a server clock.
type clockStore struct {
	*memStore
	now time.Time
}

func (c clockStore) ServerTime(context.Context) (time.Time, error) { return c.now, nil }

// The timed store passes its store's server clock through, so
// machine.Acquire still checks the host's clock against it.
func TestStorePassesServerClockThrough(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	col := New(Options{})
	if got, err := machine.ServerTimeOf(t.Context(), col.Store(clockStore{newMemStore(), at})); err != nil || !got.Equal(at) {
		t.Fatalf("ServerTimeOf(the timed store) = %v, %v; want %v", got, err, at)
	}
	if got, err := machine.ServerTimeOf(t.Context(), col.Store(newMemStore())); err != nil || !got.IsZero() {
		t.Fatalf("ServerTimeOf(a timed store without a server clock) = %v, %v; want the zero time", got, err)
	}
}

// A UUID generator handed out through the provider stays one, and its
// UUIDs are counted as issued.
func TestProviderCountsUUIDs(t *testing.T) {
	ctx := context.Background()
	reg := engine.NewRegistry()
	if err := reg.Register("uuidv7", "", uuidv7.New(nil)); err != nil {
		t.Fatal(err)
	}
	col := New(Options{})
	g, err := engine.UUIDGeneratorOf(ctx, col.Provider(reg), "uuidv7", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := g.NextUUID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if gens := col.Snapshot().Generators; len(gens) != 1 || gens[0].Kind != "uuidv7" || gens[0].Issued != 3 {
		t.Errorf("generators = %+v, want uuidv7 with 3 issued", gens)
	}
}
