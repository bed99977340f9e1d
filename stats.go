package idforge

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/reason"
)

// Stats is a snapshot of a registry's figures, as [Registry.Stats] returns
// it: a value the caller owns, read by the Prometheus collector (package
// metrics) and the state page of `idforge serve`: the lease, the store's
// recent calls and outages, and each generator's draws.
type Stats struct {
	// MachineID is the machine ID issued under now, -1 when none.
	MachineID int64
	// Confirmed is when the store last handed out or confirmed the
	// machine ID (zero: never, or no store).
	Confirmed time.Time
	// LeaseLost counts machine IDs found taken over.
	LeaseLost int64
	// Outage is the store outage going on, its Start when the store
	// stopped answering (zero while the store answers); LastOutage the
	// last one that ended (zero: none yet).
	Outage, LastOutage Outage
	// Calls are the recent store calls, newest first: the last 32 segment
	// fetches (op "next_max_id") and the last 8 machine-ID calls (ops
	// "distribute", "guard", "revert").
	Calls []StoreCall
	// Generators are the generators drawn from so far, sorted by kind and
	// name.
	Generators []GeneratorStats
}

// Outage is a stretch of time the store did not answer: from a store call
// that failed with engine.ErrStoreUnavailable or a deadline to the next
// call it answered. Meanwhile snowflake IDs ride through on the lease and
// chains serve what they fetched ahead; Served and Refused say how that
// went.
type Outage struct {
	// Start is when the first failed call began; zero: no outage.
	Start time.Time
	// End is when the store answered again; zero while the outage lasts.
	End time.Time
	// Served counts the IDs handed out during the outage, Refused the IDs
	// asked for and not handed out (one per failed NextID, the rest of the
	// batch for a failed NextIDs), by generator kind. Dated chains, drawn
	// outside the registry's counting, are not in them.
	Served, Refused map[string]int64
}

// Duration is how long the outage lasted, or has lasted until now while
// it goes on; zero without one.
func (o Outage) Duration(now time.Time) time.Duration {
	switch {
	case o.Start.IsZero():
		return 0
	case o.End.IsZero():
		return now.Sub(o.Start)
	}
	return o.End.Sub(o.Start)
}

// StoreCall is one call of the registry to its store.
type StoreCall struct {
	Time     time.Time
	Op       string // next_max_id, distribute, guard, revert
	Name     string // the sequence, or the namespace of a machine-ID call
	Duration time.Duration
	Err      string
}

// GeneratorStats is one generator's figures in [Stats].
type GeneratorStats struct {
	Kind, Name string
	// Issued counts the IDs handed out.
	Issued int64
	// Errors counts failed draws by reason (store_unavailable,
	// clock_backwards, machine_id_lost, ...).
	Errors map[string]int64
	// Ahead is how many IDs a chain has fetched and not handed out yet:
	// how long it serves without the store. Zero for other kinds.
	Ahead int64
	// Discarded counts the IDs a chain fetched and never handed out:
	// expired by the TTL, dropped by Close or after a store reset. Zero
	// for other kinds.
	Discarded int64
	// A chain's prefetching, zero for other kinds: Step is the number of
	// IDs per segment; PrefetchDistance the prefetch distance in segments
	// (the safe distance, or more while callers are hungry); Fetches
	// counts successful store calls and Failures failed ones; Hungry
	// counts draws that found no ID ready and waited; LastError is the
	// last failed fetch, nil once the store answers again.
	Step, PrefetchDistance    int64
	Fetches, Failures, Hungry int64
	LastError                 error
}

// chainFigures adds a chain's figures to g.
func chainFigures(g *GeneratorStats, st chain.Stats) {
	g.Ahead, g.Discarded = st.Ahead, st.Discarded
	g.Step, g.PrefetchDistance = st.Step, st.PrefetchDistance
	g.Fetches, g.Failures, g.Hungry, g.LastError = st.Fetches, st.Failures, st.Hungry, st.LastError
}

// Stats returns the registry's figures now.
func (r *Registry) Stats() Stats {
	s := Stats{MachineID: r.sf.MachineID(), LeaseLost: r.sf.Lost()}
	r.stats.fill(&s)
	seen := map[genKey]bool{}
	r.stats.mu.Lock()
	for k, c := range r.stats.gens {
		seen[k] = true
		s.Generators = append(s.Generators, c.stats())
	}
	r.stats.mu.Unlock()
	for name, c := range r.chainsByName() { // dated chains, drawn from outside the cache
		if !seen[genKey{genreg.Chain, name}] {
			st := c.Stats()
			g := GeneratorStats{Kind: genreg.Chain, Name: name, Issued: st.Issued, Errors: map[string]int64{}}
			chainFigures(&g, st)
			s.Generators = append(s.Generators, g)
		}
	}
	sort.Slice(s.Generators, func(i, j int) bool {
		a, b := s.Generators[i], s.Generators[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return s
}

// chainsByName returns the chains built so far, by sequence name.
func (r *Registry) chainsByName() map[string]*chain.Chain {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*chain.Chain, len(r.chains))
	for _, c := range r.chains {
		out[c.Name()] = c
	}
	return out
}

type genKey struct{ kind, name string }

// stats is what a registry counts: its generators' draws, its store's
// calls and the lease they tell of.
type stats struct {
	mu     sync.Mutex
	gens   map[genKey]*counted
	calls  ring // segment fetches
	leases ring // machine-ID calls

	// The generators' counts when the current outage began, nil while the
	// store answers: what they did during it is the difference, so a draw
	// costs nothing more than before for the outage figures. A generator
	// built during the outage has none, and counts from zero.
	base map[*counted]drawn
	last Outage // the last outage that ended

	confirmed atomic.Int64 // Unix nanoseconds; 0: never

	down atomic.Int64 // Unix nanoseconds the store stopped answering; 0: it answers
}

// drawn is what a generator has handed out and refused so far.
type drawn struct{ served, refused int64 }

func newStats() *stats {
	return &stats{gens: map[genKey]*counted{}, calls: ring{calls: make([]StoreCall, 0, 32)}, leases: ring{calls: make([]StoreCall, 0, 8)}}
}

func (st *stats) fill(s *Stats) {
	if t := st.confirmed.Load(); t != 0 {
		s.Confirmed = time.Unix(0, t)
	}
	st.mu.Lock()
	s.Calls = append(st.calls.newestFirst(), st.leases.newestFirst()...)
	if st.base != nil {
		s.Outage = st.outage(time.Time{})
	}
	s.LastOutage = st.last
	st.mu.Unlock()
	sort.SliceStable(s.Calls, func(i, j int) bool { return s.Calls[i].Time.After(s.Calls[j].Time) })
}

// wrapChain returns the chain c counted under the kind "chain" and name.
func (st *stats) wrapChain(name string, c *chain.Chain) engine.Generator {
	return st.add(&counted{st: st, kind: genreg.Chain, name: name, g: c, chain: c, held: c, errors: map[string]int64{}})
}

// wrapSingle returns the single-segment generator g counted under the kind
// "segment" and name.
func (st *stats) wrapSingle(name string, g *chain.Single) engine.Generator {
	return st.add(&counted{st: st, kind: genreg.Segment, name: name, g: g, held: g, errors: map[string]int64{}})
}

// discarder is a generator that holds IDs drawn from the store and can drop
// them: a chain.Chain or a chain.Single.
type discarder interface{ Discard(cause error) }

// wrap returns g counted under kind and name; a UUID generator stays one.
func (st *stats) wrap(kind, name string, g engine.Generator) engine.Generator {
	return st.add(&counted{st: st, kind: kind, name: name, g: g, errors: map[string]int64{}})
}

// add counts c's generator from now on.
func (st *stats) add(c *counted) engine.Generator {
	kind, name, g := c.kind, c.name, c.g
	st.mu.Lock()
	st.gens[genKey{kind, name}] = c
	st.mu.Unlock()
	if _, ok := g.(engine.UUIDGenerator); ok {
		return countedUUIDs{c}
	}
	return c
}

// record notes one store call and whether the store answered.
func (st *stats) record(op, name string, start time.Time, err error) {
	call := StoreCall{Time: start, Op: op, Name: name, Duration: time.Since(start)}
	if err != nil {
		call.Err = err.Error()
	}
	st.mu.Lock()
	switch {
	case err == nil:
		if st.base != nil {
			st.last = st.outage(start.Add(call.Duration))
			st.base = nil
		}
		st.down.Store(0)
	case errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded):
		if st.base == nil {
			st.base = map[*counted]drawn{}
			for _, c := range st.gens {
				st.base[c] = c.drawn()
			}
			st.down.Store(start.UnixNano())
		}
	}
	if op == "next_max_id" {
		st.calls.add(call)
	} else {
		st.leases.add(call)
	}
	st.mu.Unlock()
}

// outage returns the current outage's figures, ended at end (zero: it
// goes on). The caller holds st.mu and there is an outage.
func (st *stats) outage(end time.Time) Outage {
	o := Outage{Start: time.Unix(0, st.down.Load()), End: end, Served: map[string]int64{}, Refused: map[string]int64{}}
	for k, c := range st.gens {
		now, then := c.drawn(), st.base[c]
		o.Served[k.kind] += now.served - then.served
		o.Refused[k.kind] += now.refused - then.refused
	}
	return o
}

// ring keeps the last cap(calls) calls.
type ring struct {
	calls []StoreCall
	next  int
}

func (r *ring) add(c StoreCall) {
	if len(r.calls) < cap(r.calls) {
		r.calls = append(r.calls, c)
	} else {
		r.calls[r.next] = c
	}
	r.next = (r.next + 1) % cap(r.calls)
}

func (r *ring) newestFirst() []StoreCall {
	out := make([]StoreCall, 0, len(r.calls))
	for i := range len(r.calls) {
		out = append(out, r.calls[(r.next-1-i+2*cap(r.calls))%cap(r.calls)])
	}
	return out
}

// counted is a generator of the registry that counts what it hands out.
type counted struct {
	st         *stats
	kind, name string
	g          engine.Generator
	chain      *chain.Chain // g when it is a chain: its Stats add Ahead and Discarded
	held       discarder    // g when it holds IDs drawn from the store
	issued     atomic.Int64
	mu         sync.Mutex
	errors     map[string]int64
	refused    int64 // IDs asked for in failed draws and not handed out
}

// NextID draws from the generator and counts the outcome.
func (c *counted) NextID(ctx context.Context) (int64, error) {
	id, err := c.g.NextID(ctx)
	c.count(1, err)
	return id, err
}

// NextIDs fills dst, counting the batch once; it returns how many IDs it
// drew before an error (the batch form `idforge serve` draws with).
func (c *counted) NextIDs(ctx context.Context, dst []int64) (int, error) {
	for i := range dst {
		id, err := c.g.NextID(ctx)
		if err != nil {
			c.issued.Add(int64(i))
			c.failed(int64(len(dst)-i), err)
			return i, err
		}
		dst[i] = id
	}
	c.count(int64(len(dst)), nil)
	return len(dst), nil
}

// count counts a draw of n IDs: handed out, or refused with err.
func (c *counted) count(n int64, err error) {
	if err != nil {
		c.failed(n, err)
		return
	}
	c.issued.Add(n)
}

// failed counts a failed draw that refused n IDs.
func (c *counted) failed(n int64, err error) {
	r := reason.Of(err)
	c.mu.Lock()
	c.errors[r]++
	c.refused += n
	c.mu.Unlock()
}

// drawn returns what c has handed out and refused so far.
func (c *counted) drawn() drawn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return drawn{served: c.issued.Load(), refused: c.refused}
}

// Discard drops what the generator holds from the store, when it holds
// anything: what the registry does to every chain on a store reset.
func (c *counted) Discard(cause error) {
	if c.held != nil {
		c.held.Discard(cause)
	}
}

// Close closes the generator, when it holds anything to close.
func (c *counted) Close() error {
	if cl, ok := c.g.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

func (c *counted) stats() GeneratorStats {
	out := GeneratorStats{Kind: c.kind, Name: c.name, Issued: c.issued.Load(), Errors: map[string]int64{}}
	c.mu.Lock()
	for r, n := range c.errors {
		out.Errors[r] = n
	}
	c.mu.Unlock()
	if c.chain != nil {
		chainFigures(&out, c.chain.Stats())
	}
	return out
}

// countedUUIDs counts a generator of UUIDs.
type countedUUIDs struct{ *counted }

// NextUUID draws from the generator and counts the outcome.
func (c countedUUIDs) NextUUID(ctx context.Context) ([16]byte, error) {
	u, err := c.g.(engine.UUIDGenerator).NextUUID(ctx)
	c.count(1, err)
	return u, err
}

// countedStore is the registry's store with every call timed and the lease
// followed.
type countedStore struct {
	st Store
	s  *stats
}

// Terms are the store's: the lease reserves its window and is checked
// against its grace.
func (c *countedStore) Terms() machine.Terms { return c.st.Terms() }

// ServerTime is the store's, so the lease checks the clock against it.
func (c *countedStore) ServerTime(ctx context.Context) (time.Time, error) {
	return c.st.ServerTime(ctx)
}

func (c *countedStore) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	start := time.Now()
	st, err := c.st.Distribute(ctx, inst, machineBits, safeGuard)
	c.s.record("distribute", inst.Namespace, start, err)
	if err == nil {
		c.s.confirmed.Store(time.Now().UnixNano())
	}
	return st, err
}

func (c *countedStore) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	start := time.Now()
	err := c.st.Guard(ctx, inst, st)
	c.s.record("guard", inst.Namespace, start, err)
	if err == nil {
		c.s.confirmed.Store(time.Now().UnixNano())
	}
	return err
}

func (c *countedStore) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	start := time.Now()
	err := c.st.Revert(ctx, inst, st)
	c.s.record("revert", inst.Namespace, start, err)
	return err
}

func (c *countedStore) Segment(name string, floors ...engine.Floor) (segment.Distributor, error) {
	d, err := c.st.Segment(name, floors...)
	if err != nil {
		return nil, err
	}
	return countedSegment{s: c.s, name: name, d: d}, nil
}

type countedSegment struct {
	s    *stats
	name string
	d    segment.Distributor
}

func (d countedSegment) NextMaxID(ctx context.Context, step int64) (int64, error) {
	start := time.Now()
	max, err := d.d.NextMaxID(ctx, step)
	d.s.record("next_max_id", d.name, start, err)
	return max, err
}

// Confirmed is the store's, for a chain's fence.
func (d countedSegment) Confirmed() time.Time { return d.d.Confirmed() }
