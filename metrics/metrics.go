// Package metrics is a Prometheus collector for idforge generators, for
// library users and for `idforge serve` alike. It holds no global state:
// build a [Collector], route the registry's store and provider through it,
// and register it in your own prometheus.Registry.
//
//	col := metrics.New(metrics.Options{})
//	reg, _ := idforge.New(ctx, idforge.Settings{Store: col.Store(st)}) // store calls and the lease
//	col.Watch(reg)                                                    // machine ID, every chain
//	p := col.Provider(reg)                                            // IDs issued per generator
//	promReg := prometheus.NewRegistry()
//	promReg.MustRegister(col)
//	http.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
//
// Metrics (prefix "idforge_" unless Options.Namespace says otherwise):
//
//	ids_issued_total{kind,name}                 IDs handed out through Provider
//	id_errors_total{kind,name,reason}           NextID failures by reason (clock_backwards, machine_id_lost, store_unavailable, ...)
//	clock_backwards_waits_total{kind,name}      snowflake NextID calls that waited for a clock behind the last tick (the generator's own count, every caller's)
//	clock_backwards_refusals_total{kind,name}   snowflake NextID calls through Provider refused because the clock went back too far
//	chain_head_gap{name}                        IDs fetched and not handed out yet (how far the chain is ahead)
//	chain_prefetch_distance{name}               prefetch distance in segments (grows while callers are hungry)
//	chain_step{name}                            IDs per segment
//	chain_fetches_total{name}                   successful segment fetches
//	chain_fetch_failures_total{name}            failed segment fetches
//	chain_hungry_total{name}                    NextID calls that found no ID ready and waited
//	chain_discarded_total{name}                 fetched IDs never handed out (TTL, Close)
//	store_request_duration_seconds{op,name}     store call latency histogram (op: next_max_id, distribute, guard, revert)
//	store_errors_total{op,name}                 failed store calls
//	lease_machine_id                            the machine ID held, -1 when none
//	lease_heartbeat_age_seconds                 time since the store last confirmed the machine ID
//	lease_lost_total                            times the machine ID was found taken over
package metrics

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/idgen"
)

// Options configures [New]. The zero value works.
type Options struct {
	// Namespace prefixes every metric name; "" is "idforge".
	Namespace string
	// MachineID, when set, reports the machine ID in use (for example the
	// registry's MachineID); otherwise the last one the store handed out
	// through [Collector.Store] is reported.
	MachineID func() int64
	// Chains, when set, lists chains to report besides those drawn through
	// [Collector.Provider] (for example an *idforge.Registry's Chains), so
	// chains the GORM plugin or the sqlx helper draw from show up too;
	// their IDs issued come from the chain's own count.
	Chains func() map[string]*segment.Chain
	// Recent is how many segment fetches [Collector.Snapshot] keeps; 0 is 32.
	Recent int
}

// Store is the store contract the collector instruments: machine IDs and
// named segment sequences.
type Store interface {
	machine.Distributor
	Segment(name string, floors ...engine.Floor) (segment.Distributor, error)
}

// Collector collects idforge metrics. It is a prometheus.Collector and is
// safe for concurrent use.
type Collector struct {
	opts Options

	storeLatency *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec

	issued, idErrors, bwWaits, bwRefusals, chainGap, chainDistance, chainStep,
	chainFetches, chainFailures, chainHungry, chainDiscarded, leaseID, leaseAge, leaseLost *prometheus.Desc

	mu             sync.Mutex
	gens           map[genKey]*counted
	fetches, lease ring // recent segment fetches and machine-ID calls

	watched       atomic.Pointer[Source]
	machineID     atomic.Int64
	lastConfirmed atomic.Int64 // Unix nanoseconds of the last successful Distribute or Guard
	acquired      atomic.Int64 // Unix nanoseconds of the last Distribute
	lost          atomic.Int64
	leaseErr      atomic.Pointer[string]
}

type genKey struct{ kind, name string }

// Registry kinds the collector treats specially.
const (
	kindSnowflake = "snowflake"
	kindChain     = "chain"
)

// New returns a collector. Register it in a prometheus.Registry of your own.
func New(opts Options) *Collector {
	if opts.Namespace == "" {
		opts.Namespace = "idforge"
	}
	if opts.Recent <= 0 {
		opts.Recent = 32
	}
	ns := opts.Namespace
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	c := &Collector{
		opts: opts,
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "store_request_duration_seconds",
			Help:    "Latency of store calls: segment fetches and machine-ID distribute, guard and revert.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "name"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "store_errors_total", Help: "Store calls that failed.",
		}, []string{"op", "name"}),
		issued:         d("ids_issued_total", "IDs handed out.", "kind", "name"),
		idErrors:       d("id_errors_total", "NextID calls that failed, by reason.", "kind", "name", "reason"),
		bwWaits:        d("clock_backwards_waits_total", "Snowflake NextID calls that waited for a clock behind the last tick, counted by the generator for every caller.", "kind", "name"),
		bwRefusals:     d("clock_backwards_refusals_total", "Snowflake NextID calls through the provider refused because the clock went back too far.", "kind", "name"),
		chainGap:       d("chain_head_gap", "IDs a chain has fetched and not handed out yet.", "name"),
		chainDistance:  d("chain_prefetch_distance", "A chain's prefetch distance in segments.", "name"),
		chainStep:      d("chain_step", "IDs per segment.", "name"),
		chainFetches:   d("chain_fetches_total", "Successful segment fetches.", "name"),
		chainFailures:  d("chain_fetch_failures_total", "Failed segment fetches.", "name"),
		chainHungry:    d("chain_hungry_total", "NextID calls that found no ID ready and waited.", "name"),
		chainDiscarded: d("chain_discarded_total", "Fetched IDs never handed out.", "name"),
		leaseID:        d("lease_machine_id", "The machine ID held, -1 when none."),
		leaseAge:       d("lease_heartbeat_age_seconds", "Seconds since the store last confirmed the machine ID."),
		leaseLost:      d("lease_lost_total", "Times the machine ID was found taken over by another instance."),
		gens:           map[genKey]*counted{},
		fetches:        ring{calls: make([]Call, 0, opts.Recent)},
		lease:          ring{calls: make([]Call, 0, 8)},
	}
	c.machineID.Store(-1)
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.storeLatency.Describe(ch)
	c.storeErrors.Describe(ch)
	for _, d := range []*prometheus.Desc{c.issued, c.idErrors, c.bwWaits, c.bwRefusals, c.chainGap, c.chainDistance,
		c.chainStep, c.chainFetches, c.chainFailures, c.chainHungry, c.chainDiscarded, c.leaseID, c.leaseAge, c.leaseLost} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.storeLatency.Collect(ch)
	c.storeErrors.Collect(ch)
	cnt := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, g := range c.generators() {
		cnt(c.issued, g.issuedCount(), g.kind, g.name)
		g.mu.Lock()
		for reason, n := range g.errors {
			cnt(c.idErrors, n, g.kind, g.name, reason)
		}
		g.mu.Unlock()
		if g.kind == kindSnowflake {
			cnt(c.bwWaits, g.backwardsWaits(), g.kind, g.name)
			cnt(c.bwRefusals, g.bwRefusals.Load(), g.kind, g.name)
		}
		if st, ok := g.chainStats(); ok {
			gauge(c.chainGap, float64(st.Ahead), g.name)
			gauge(c.chainDistance, float64(st.PrefetchDistance), g.name)
			gauge(c.chainStep, float64(st.Step), g.name)
			cnt(c.chainFetches, st.Fetches, g.name)
			cnt(c.chainFailures, st.Failures, g.name)
			cnt(c.chainHungry, st.Hungry, g.name)
			cnt(c.chainDiscarded, st.Discarded, g.name)
		}
	}
	gauge(c.leaseID, float64(c.currentMachineID()))
	if t := c.lastConfirmed.Load(); t != 0 {
		gauge(c.leaseAge, time.Since(time.Unix(0, t)).Seconds())
	}
	cnt(c.leaseLost, c.lost.Load())
}

func (c *Collector) currentMachineID() int64 {
	if w := c.watched.Load(); w != nil {
		return (*w).MachineID()
	}
	if c.opts.MachineID != nil {
		return c.opts.MachineID()
	}
	return c.machineID.Load()
}

// generators returns the generators seen so far, and Options.Chains' chains
// not seen through the provider, sorted by kind and name.
func (c *Collector) generators() []*counted {
	c.mu.Lock()
	out := make([]*counted, 0, len(c.gens))
	for _, g := range c.gens {
		out = append(out, g)
	}
	c.mu.Unlock()
	chains := c.opts.Chains
	if w := c.watched.Load(); w != nil {
		chains = (*w).Chains
	}
	if chains != nil {
		for name, ch := range chains() {
			c.mu.Lock()
			_, seen := c.gens[genKey{kindChain, name}]
			c.mu.Unlock()
			if !seen && ch != nil {
				out = append(out, &counted{kind: kindChain, name: name, g: ch, fromStats: true})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].name < out[j].name
	})
	return out
}

// Source is what [Collector.Watch] reads: an *idforge.Registry is one.
type Source interface {
	// MachineID is the machine ID in use, -1 when none.
	MachineID() int64
	// Chains are the segment chains built so far, by name.
	Chains() map[string]*segment.Chain
}

// Watch reports src's machine ID and all its chains (also those the GORM
// plugin or the sqlx helper draw from without going through
// [Collector.Provider]); it takes precedence over Options.MachineID and
// Options.Chains. Call it once the registry is built.
func (c *Collector) Watch(src Source) { c.watched.Store(&src) }

// Provider returns p with every generator it hands out counted: IDs issued,
// errors by reason, and for segment chains their prefetch state. Hand the
// result to the integrations (GORM plugin, sqlx helper, serve) instead of p.
func (c *Collector) Provider(p engine.Provider) engine.Provider { return provider{c, p} }

type provider struct {
	c *Collector
	p engine.Provider
}

func (p provider) Generator(ctx context.Context, kind, name string) (engine.Generator, error) {
	g, err := p.p.Generator(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	return p.c.Generator(kind, name, g), nil
}

// Dated hands out p's dated chains, when p makes them (an
// *idforge.Registry with a store does); their chains are counted by Watch.
func (p provider) Dated(name, format string) (engine.StringGenerator, error) {
	return idgen.Dated(p.p, name, format)
}

// Generator returns g counted under kind and name. Asking again for the same
// kind, name and g returns the same counter. A g that is also an
// engine.UUIDGenerator stays one, its UUIDs counted too.
func (c *Collector) Generator(kind, name string, g engine.Generator) engine.Generator {
	w := c.counter(kind, name, g)
	if _, ok := g.(engine.UUIDGenerator); ok {
		return countedUUIDs{w}
	}
	return w
}

// counter returns the counter of g under kind and name.
func (c *Collector) counter(kind, name string, g engine.Generator) *counted {
	k := genKey{kind, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.gens[k]; ok && have.g == g {
		return have
	}
	w := &counted{c: c, kind: kind, name: name, g: g, errors: map[string]int64{}}
	if have, ok := c.gens[k]; ok { // the provider replaced the generator: keep counting on
		w.issued.Store(have.issued.Load())
		w.bwBase = have.backwardsWaits()
		w.bwRefusals.Store(have.bwRefusals.Load())
		have.mu.Lock()
		for r, n := range have.errors {
			w.errors[r] = n
		}
		have.mu.Unlock()
	}
	c.gens[k] = w
	return w
}

// counted is a generator that counts what it hands out.
type counted struct {
	c          *Collector
	kind, name string
	g          engine.Generator
	bwBase     int64 // backwardsWaits of the generator g replaced

	fromStats  bool // a chain not drawn through the provider: its own count is the truth
	issued     atomic.Int64
	bwRefusals atomic.Int64
	mu         sync.Mutex
	errors     map[string]int64
}

// NextID draws from the generator and counts the outcome.
func (w *counted) NextID(ctx context.Context) (int64, error) {
	id, err := w.g.NextID(ctx)
	if err != nil {
		w.fail(err)
		return 0, err
	}
	w.issued.Add(1)
	return id, nil
}

// countedUUIDs counts a generator of UUIDs.
type countedUUIDs struct{ *counted }

// NextUUID draws from the generator and counts the outcome.
func (w countedUUIDs) NextUUID(ctx context.Context) ([16]byte, error) {
	u, err := w.g.(engine.UUIDGenerator).NextUUID(ctx)
	if err != nil {
		w.fail(err)
		return u, err
	}
	w.issued.Add(1)
	return u, nil
}

// NextIDs fills dst from the generator, counting the batch once; it
// returns how many IDs it drew before an error.
func (w *counted) NextIDs(ctx context.Context, dst []int64) (int, error) {
	for i := range dst {
		id, err := w.g.NextID(ctx)
		if err != nil {
			w.issued.Add(int64(i))
			w.fail(err)
			return i, err
		}
		dst[i] = id
	}
	w.issued.Add(int64(len(dst)))
	return len(dst), nil
}

func (w *counted) fail(err error) {
	r := Reason(err)
	if r == "clock_backwards" {
		w.bwRefusals.Add(1)
	}
	w.mu.Lock()
	w.errors[r]++
	w.mu.Unlock()
}

// issuedCount is the IDs issued.
func (w *counted) issuedCount() int64 {
	if w.fromStats {
		if st, ok := w.chainStats(); ok {
			return st.Issued
		}
	}
	return w.issued.Load()
}

// backwardsWaits is what the snowflake generator counted of its waits for
// a clock stepped back (snowflake.Generator.BackwardsWaits, also on
// engine/leased), over every generator the provider handed out here.
func (w *counted) backwardsWaits() int64 {
	if b, ok := w.g.(interface{ BackwardsWaits() int64 }); ok {
		return w.bwBase + b.BackwardsWaits()
	}
	return w.bwBase
}

func (w *counted) chainStats() (segment.Stats, bool) {
	if s, ok := w.g.(interface{ Stats() segment.Stats }); ok {
		return s.Stats(), true
	}
	return segment.Stats{}, false
}

// Reason names the sentinel an idforge error wraps, for metric labels:
// store_reset, no_floor, clock_backwards, machine_id_lost, store_unavailable,
// segment_exhausted, timestamp_overflow, id_overflow, machine_id_overflow,
// instance_in_use, clock_skew, closed, canceled, deadline, invalid_config,
// or other. A store reset comes
// first: the lease and the chain report it wrapped in a lost machine ID or an
// exhausted segment.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

var reasons = []struct {
	err  error
	name string
}{
	{engine.ErrStoreReset, "store_reset"},
	{engine.ErrNoFloor, "no_floor"},
	{engine.ErrClockBackwards, "clock_backwards"},
	{engine.ErrMachineIDLost, "machine_id_lost"},
	{engine.ErrStoreUnavailable, "store_unavailable"},
	{engine.ErrSegmentExhausted, "segment_exhausted"},
	{engine.ErrTimestampOverflow, "timestamp_overflow"},
	{engine.ErrIDOverflow, "id_overflow"},
	{engine.ErrMachineIDOverflow, "machine_id_overflow"},
	{engine.ErrInstanceInUse, "instance_in_use"},
	{engine.ErrClockSkew, "clock_skew"},
	{engine.ErrClosed, "closed"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline"},
	{engine.ErrInvalidConfig, "invalid_config"},
}

// Call is one store call, as [Snapshot] lists the recent ones.
type Call struct {
	Time     time.Time
	Op       string // next_max_id, distribute, guard, revert
	Name     string // segment name, or the namespace for machine calls
	Duration time.Duration
	Err      string
}

func (c *Collector) record(op, name string, start time.Time, err error) {
	d := time.Since(start)
	c.storeLatency.WithLabelValues(op, name).Observe(d.Seconds())
	call := Call{Time: start, Op: op, Name: name, Duration: d}
	if err != nil {
		c.storeErrors.WithLabelValues(op, name).Inc()
		call.Err = err.Error()
	}
	c.mu.Lock()
	if op == "next_max_id" {
		c.fetches.add(call)
	} else {
		c.lease.add(call)
	}
	c.mu.Unlock()
}

// ring keeps the last cap(calls) calls.
type ring struct {
	calls []Call
	next  int
}

func (r *ring) add(c Call) {
	if len(r.calls) < cap(r.calls) {
		r.calls = append(r.calls, c)
	} else {
		r.calls[r.next] = c
	}
	r.next = (r.next + 1) % cap(r.calls)
}

// newestFirst copies the calls, newest first.
func (r *ring) newestFirst() []Call {
	out := make([]Call, 0, len(r.calls))
	for i := range len(r.calls) {
		out = append(out, r.calls[(r.next-1-i+2*cap(r.calls))%cap(r.calls)])
	}
	return out
}

// Store returns st with every call timed and counted, and the lease of the
// registry built on it followed: its machine ID, when the store last
// confirmed it, and how often it was lost. Give the registry this store, and
// give one collector's Store to one registry.
func (c *Collector) Store(st Store) Store { return &store{c: c, st: st} }

type store struct {
	c  *Collector
	st Store
}

// ResetGrace passes st's through, so machine.Acquire still checks a lease
// against it.
func (s *store) ResetGrace() time.Duration { return machine.ResetGraceOf(s.st) }

// ServerTime passes st's through, so machine.Acquire still checks the
// clock against it.
func (s *store) ServerTime(ctx context.Context) (time.Time, error) {
	return machine.ServerTimeOf(ctx, s.st)
}

func (s *store) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	start := time.Now()
	st, err := s.st.Distribute(ctx, inst, machineBits, safeGuard)
	s.c.record("distribute", inst.Namespace, start, err)
	if err != nil {
		s.c.leaseFailed(err)
		return st, err
	}
	s.c.machineID.Store(st.MachineID)
	s.c.acquired.Store(time.Now().UnixNano())
	s.c.lastConfirmed.Store(time.Now().UnixNano())
	s.c.leaseErr.Store(nil)
	return st, nil
}

func (s *store) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	start := time.Now()
	err := s.st.Guard(ctx, inst, st)
	s.c.record("guard", inst.Namespace, start, err)
	if err != nil {
		s.c.leaseFailed(err)
		return err
	}
	s.c.lastConfirmed.Store(time.Now().UnixNano())
	s.c.leaseErr.Store(nil)
	return nil
}

func (s *store) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	start := time.Now()
	err := s.st.Revert(ctx, inst, st)
	s.c.record("revert", inst.Namespace, start, err)
	if err != nil {
		s.c.leaseFailed(err)
		return err
	}
	s.c.machineID.CompareAndSwap(st.MachineID, -1)
	return nil
}

func (c *Collector) leaseFailed(err error) {
	if errors.Is(err, engine.ErrMachineIDLost) {
		c.lost.Add(1)
		c.machineID.Store(-1)
	}
	msg := err.Error()
	c.leaseErr.Store(&msg)
}

func (s *store) Segment(name string, floors ...engine.Floor) (segment.Distributor, error) {
	d, err := s.st.Segment(name, floors...)
	if err != nil {
		return nil, err
	}
	return segmentDistributor{c: s.c, name: name, d: d}, nil
}

type segmentDistributor struct {
	c    *Collector
	name string
	d    segment.Distributor
}

func (d segmentDistributor) NextMaxID(ctx context.Context, step int64) (int64, error) {
	start := time.Now()
	max, err := d.d.NextMaxID(ctx, step)
	d.c.record("next_max_id", d.name, start, err)
	return max, err
}

// Confirmed passes the store's confirmations through to a chain's
// segment.Settings.Fence.
func (d segmentDistributor) Confirmed() time.Time {
	if c, ok := d.d.(interface{ Confirmed() time.Time }); ok {
		return c.Confirmed()
	}
	return time.Time{}
}

// Snapshot is the collector's state for a status page.
type Snapshot struct {
	Time      time.Time
	MachineID int64
	// Acquired is when the store last handed out the machine ID;
	// Confirmed when it last confirmed it (zero: never).
	Acquired, Confirmed time.Time
	// Lost counts machine IDs found taken over; LeaseError is the last
	// failed lease call, "" once one succeeds again.
	Lost       int64
	LeaseError string
	Generators []Generator
	// Recent are the last segment fetches (Options.Recent of them),
	// RecentLease the last 8 machine-ID calls (distribute, guard, revert),
	// newest first.
	Recent, RecentLease []Call
}

// Generator is one generator's figures in a [Snapshot].
type Generator struct {
	Kind, Name string
	Issued     int64
	Errors     map[string]int64
	// Chain is the chain's state for segment chains, nil otherwise.
	Chain *segment.Stats
}

// Snapshot returns the collector's current figures.
func (c *Collector) Snapshot() Snapshot {
	s := Snapshot{Time: time.Now(), MachineID: c.currentMachineID(), Lost: c.lost.Load()}
	if t := c.acquired.Load(); t != 0 {
		s.Acquired = time.Unix(0, t)
	}
	if t := c.lastConfirmed.Load(); t != 0 {
		s.Confirmed = time.Unix(0, t)
	}
	if e := c.leaseErr.Load(); e != nil {
		s.LeaseError = *e
	}
	for _, g := range c.generators() {
		out := Generator{Kind: g.kind, Name: g.name, Issued: g.issuedCount(), Errors: map[string]int64{}}
		g.mu.Lock()
		for r, n := range g.errors {
			out.Errors[r] = n
		}
		g.mu.Unlock()
		if st, ok := g.chainStats(); ok {
			out.Chain = &st
		}
		s.Generators = append(s.Generators, out)
	}
	c.mu.Lock()
	s.Recent = c.fetches.newestFirst()
	s.RecentLease = c.lease.newestFirst()
	c.mu.Unlock()
	return s
}
