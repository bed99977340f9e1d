package idforge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/uuidv7"
)

// defaultNamespace is the namespace of a registry given none.
const defaultNamespace = "default"

// stateDirOff is the Settings.StateDir (or IDFORGE_STATE_DIR) that turns the
// local state file off.
const stateDirOff = "off"

// Store is a shared store of machine IDs and segments: engine/sqlstore's and
// engine/redisstore's Store are. It hands out machine IDs as a
// machine.Distributor and one segment distributor per sequence name. A store
// that finds it was reset answers with errors wrapping engine.ErrStoreReset.
type Store interface {
	machine.Distributor
	Segment(name string, floors ...engine.Floor) (segment.Distributor, error)
}

// Settings configures [New]. The zero value of every field means its
// documented default: Settings{} is a registry with the snowflake kind on
// machine.Default()'s machine ID, fit for a single host.
type Settings struct {
	// Namespace names the machine-ID space, usually the service name
	// (default "default"). Instances of one service must share it;
	// different services may reuse each other's machine IDs.
	Namespace string
	// Instance is this registry's identity. The zero value is a new
	// unstable instance "hostname:pid/<random>" for every New, so two
	// registries never share a machine ID. Give a stable instance (Stable:
	// true, an ID that survives restarts, such as a pod name) to keep the
	// machine ID across restarts. Its Namespace may be left empty; if set it
	// must equal Namespace.
	Instance machine.Instance
	// Store draws machine IDs and segments from a shared store, and
	// registers the "chain" and "segment" kinds. Without it the machine ID
	// comes from Machine, else machine.Default(), and only "snowflake" is
	// registered.
	Store Store
	// Machine overrides where the machine ID comes from (for example
	// machine.StatefulSet() while segments still come from Store).
	Machine machine.Distributor
	// StateDir keeps a local state file per machine ID, so a restart on
	// the same machine ID waits out what its predecessor issued even if
	// the clock went back while it was down. For distributors that store
	// no timestamps (machine.Manual, machine.StatefulSet, machine.Default
	// without a store) it defaults to $IDFORGE_STATE_DIR, else "idforge" in
	// the user cache directory; with a store it is off unless set. For
	// those distributors it also holds a lock file per machine ID, locked
	// while the registry holds the ID: a second process on this host with
	// the same machine ID, namespace and StateDir is refused at New with
	// engine.ErrInstanceInUse, and with no machine ID configured
	// machine.Default() takes the lowest one no process on this host
	// holds. "off" (or IDFORGE_STATE_DIR=off where the default applies)
	// runs without a state file, for a read-only file system: a restart on
	// a fixed machine ID then cannot wait out a clock that went back while
	// it was down, nothing stops two processes from sharing a machine ID
	// (keeping them apart is then yours alone), and machine.Default()
	// without configuration is machine ID 0 for every process. New fails
	// with engine.ErrInvalidConfig, naming the directory, when it cannot
	// be created, and the first write of the file (at New) with
	// engine.ErrStoreUnavailable when it cannot be written.
	StateDir string
	// Layout is the snowflake generator's bit layout (default
	// snowflake.Default); its machine bits are the lease's.
	Layout snowflake.Layout
	// MaxBackwards is how long the snowflake generator waits out a clock
	// step back it cannot ride on its steady time base (default 10 ms;
	// negative: not at all; see snowflake.Settings.MaxBackwards).
	MaxBackwards time.Duration
	// Lease tunes the machine-ID lease: Heartbeat, SafeGuard, SkewMargin.
	// The machine bits (the layout's), clock and logger are the
	// registry's; how far ahead each heartbeat reserves time is the
	// store's ride-through window (its RideThrough setting), which must be
	// longer than Heartbeat.
	Lease machine.Settings
	// Chain tunes every chain and segment generator: Step, SafeDistance,
	// TTL... Each is named after its sequence and runs on Clock and
	// Logger.
	Chain segment.Settings
	// Clock is the time source the whole registry runs on (default
	// clock.System): the snowflake generator and its lease, which
	// heartbeats the generator's newest timestamp, the chains' TTLs and
	// fences, the uuidv7 generator and the periods of dated chains.
	Clock clock.Clock
	// Logger receives lease and chain events (default slog.Default()).
	Logger *slog.Logger
	// Zone is the time zone whose days, months and years dated chains
	// count in (see [Registry.Dated]; default UTC).
	Zone *time.Location
}

// Registry hands out the generators New builds, by kind and name, and
// says how they are doing ([Registry.Stats]). It is an engine.Provider for
// the GORM plugin, the sqlx helper and the sharding repositories, and safe
// for concurrent use.
type Registry struct {
	gens  *genreg.Registry // the one cache of generators, each counted once
	stats *stats
	sf    *leased.Snowflake

	// What dated chains are built with (see Dated); store is nil without one.
	store  Store
	chain  segment.Settings
	clock  clock.Clock
	logger *slog.Logger
	zone   *time.Location

	mu      sync.Mutex
	chains  []*chain.Chain            // every chain built, for a store reset and Stats
	singles []*chain.Single           // every segment generator built, for a store reset
	floors  map[string][]engine.Floor // by sequence name, see AddFloor
	series  map[string]*series        // dated chains, by name and period
	closed  bool
}

// New builds a registry: it leases a machine ID (waiting out the last
// timestamp stored for it), registers the snowflake generator on it, and
// with a store registers chain and segment factories. Close the registry to
// give the machine ID back and stop the chains' workers.
func New(ctx context.Context, s Settings) (*Registry, error) {
	st := newStats()
	dist, err := s.resolve(st)
	if err != nil {
		return nil, err
	}
	r := &Registry{gens: genreg.New(), stats: st, store: s.Store, chain: s.Chain, clock: s.Clock, logger: s.Logger, zone: s.Zone}
	r.sf, err = leased.New(ctx, leased.Settings{
		Distributor: dist,
		Instance:    s.Instance,
		Snowflake:   snowflake.Settings{Layout: s.Layout, Clock: s.Clock, MaxBackwards: s.MaxBackwards},
		Lease:       s.Lease,
		Logger:      s.Logger,
		OnReset:     r.discardHeld,
	})
	if err != nil {
		return nil, err
	}
	if err := r.resolveFence(&s); err != nil {
		r.sf.Close()
		return nil, err
	}
	if err := errors.Join(r.gens.Register(genreg.Snowflake, "", r.stats.wrap(genreg.Snowflake, "", r.sf)),
		r.gens.Register(genreg.UUIDv7, "", r.stats.wrap(genreg.UUIDv7, "", uuidv7.New(s.Clock)))); err != nil {
		r.sf.Close()
		return nil, err
	}
	if s.Store != nil {
		// genreg builds a sequence's generator on the first use of its name.
		if err := errors.Join(r.gens.RegisterFactory(genreg.Chain, r.chainGenerator), r.gens.RegisterFactory(genreg.Segment, r.segmentGenerator)); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// resolveFence turns a negative Chain.Fence into the lease's reservation
// (the store's ride-through window) and refuses a Fence past it: chains
// would serve held IDs after snowflake IDs stop, past what the store's
// reset grace covers.
func (r *Registry) resolveFence(s *Settings) error {
	res := r.sf.Lease().Reservation()
	switch f := s.Chain.Fence; {
	case f < 0 && res <= 0:
		return fmt.Errorf("%w: Chain.Fence %v asks for a fence at the store's ride-through window, but the lease reserves no time ahead (the store's RideThrough is negative): give the Fence a positive duration, or 0 for none",
			engine.ErrInvalidConfig, f)
	case f < 0:
		s.Chain.Fence = res
		r.chain = s.Chain
		return chain.Validate(s.Chain) // Ahead against the Fence now set
	case f > res:
		return fmt.Errorf("%w: Chain.Fence %v is longer than the lease's reservation %v (the store's RideThrough): chains would serve held IDs after snowflake IDs stop, past what the store's reset grace covers",
			engine.ErrInvalidConfig, f, res)
	}
	return nil
}

// resolve fills the defaults into s, refuses contradictions, and returns the
// machine-ID distributor to lease from.
func (s *Settings) resolve(st *stats) (machine.Distributor, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{engine.ErrInvalidConfig}, args...)...)
	}
	if s.Store != nil && reflect.ValueOf(s.Store).Kind() == reflect.Pointer && reflect.ValueOf(s.Store).IsNil() {
		return nil, bad("Settings.Store is a nil %T", s.Store)
	}
	if s.Store != nil { // counted once, here: every lease call and segment fetch
		s.Store = &countedStore{st: s.Store, s: st}
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Zone == nil {
		s.Zone = time.UTC
	}
	switch {
	case s.Namespace == "":
		s.Namespace = s.Instance.Namespace
		if s.Namespace == "" {
			s.Namespace = defaultNamespace
		}
	case s.Instance.Namespace != "" && s.Instance.Namespace != s.Namespace:
		return nil, bad("Instance.Namespace %q contradicts Namespace %q", s.Instance.Namespace, s.Namespace)
	}
	if err := chain.Validate(s.Chain); err != nil {
		return nil, err // now, not at the first chain draw
	}
	if s.Instance.ID == "" {
		inst, err := leased.HostInstance(s.Namespace, 0)
		if err != nil {
			return nil, err
		}
		// Two registries in one process (one per *gorm.DB, one for sqlx...)
		// must not share a machine ID: each is an instance of its own.
		var nonce [4]byte
		_, _ = rand.Read(nonce[:])
		inst.ID += "/" + hex.EncodeToString(nonce[:])
		s.Instance = inst
	}
	s.Instance.Namespace = s.Namespace
	dist := s.Machine
	switch {
	case dist != nil:
	case s.Store != nil:
		dist = s.Store
	default:
		dist = machine.Default()
	}
	defaulted := s.StateDir == "" && !dist.Terms().Remembers
	if defaulted {
		s.StateDir = leased.DefaultStateDir()
	}
	if s.StateDir != "" && s.StateDir != stateDirOff {
		if err := os.MkdirAll(s.StateDir, 0o755); err != nil {
			if defaulted && os.Getenv(leased.StateDirEnv) == "" {
				// Nobody chose the directory: say how to choose one.
				return nil, bad("the default state directory %q cannot hold the local state file: %v; "+
					"set %s=/path/to/dir (or Settings.StateDir) to a writable directory on a volume that outlives the process, "+
					"or %s=%s to run without a state file", s.StateDir, err, leased.StateDirEnv, leased.StateDirEnv, stateDirOff)
			}
			return nil, bad("StateDir %q cannot hold the local state file: %v; give it (or %s) a writable directory on a volume that outlives the process, "+
				"or set it to %q to run without a state file", s.StateDir, err, leased.StateDirEnv, stateDirOff)
		}
		dist = leased.LocalState(s.StateDir, dist, s.Logger)
	}
	return dist, nil
}

// chainGenerator builds the generator of kind "chain" and name: a chain on
// the store's sequence name, counted.
func (r *Registry) chainGenerator(_ context.Context, name string) (engine.Generator, error) {
	c, err := r.newChain(r.store, r.chain, name)
	if err != nil {
		return nil, err
	}
	return r.stats.wrapChain(name, c), nil
}

// segmentGenerator builds the generator of kind "segment" and name: a
// single-segment generator on the store's sequence name, counted.
func (r *Registry) segmentGenerator(_ context.Context, name string) (engine.Generator, error) {
	g, err := r.newSingle(r.store, r.chain, name)
	if err != nil {
		return nil, err
	}
	return r.stats.wrapSingle(name, g), nil
}

// newChain builds the chain of the sequence name on st and holds it for a
// store reset.
func (r *Registry) newChain(st Store, cs segment.Settings, name string) (*chain.Chain, error) {
	d, err := st.Segment(name, r.floor)
	if err != nil {
		return nil, err
	}
	c, err := chain.New(d, cs, r.owned(name))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.chains = append(r.chains, c)
	r.mu.Unlock()
	return c, nil
}

// newSingle builds the single-segment generator of the sequence name on st
// and holds it for a store reset.
func (r *Registry) newSingle(st Store, cs segment.Settings, name string) (*chain.Single, error) {
	d, err := st.Segment(name, r.floor)
	if err != nil {
		return nil, err
	}
	g, err := chain.NewSingle(d, cs, r.owned(name))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.singles = append(r.singles, g)
	r.mu.Unlock()
	return g, nil
}

// owned is what the registry gives each of its chains and segment
// generators: the sequence's name, its clock and its logger.
func (r *Registry) owned(name string) chain.Owned {
	return chain.Owned{Name: name, Clock: r.clock, Logger: r.logger}
}

// AddFloor adds f to the floors of the sequence name: where that
// sequence's data ends, read when the store creates or re-creates its
// counter (see engine.Floor). The largest answer of a name's floors counts;
// with none, a sequence missing from a store that was not declared
// brand-new is refused with engine.ErrNoFloor. The GORM plugin and the
// sharding repositories add one per table that takes IDs from the sequence;
// add your own for tables they do not see. Floors added after the counter
// was created count from the next store reset on.
//
// A name ending in '*' adds f to every sequence whose name starts with what
// comes before it, and f is called with that sequence's name: "invoice:*"
// answers for each period of the dated chain invoice ("invoice:20261125",
// see [Registry.Dated]).
func (r *Registry) AddFloor(name string, f engine.Floor) {
	if f == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.floors == nil {
		r.floors = map[string][]engine.Floor{}
	}
	r.floors[name] = append(r.floors[name], f)
}

// floor answers for the sequence name with the largest answer of the
// floors added for it, engine.ErrNoFloor when there are none.
func (r *Registry) floor(ctx context.Context, name string) (int64, error) {
	r.mu.Lock()
	floors := slices.Clone(r.floors[name])
	for k, fs := range r.floors {
		if prefix, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(name, prefix) && k != name {
			floors = append(floors, fs...)
		}
	}
	r.mu.Unlock()
	if len(floors) == 0 {
		return 0, engine.ErrNoFloor
	}
	var best int64
	for _, f := range floors {
		n, err := f(ctx, name)
		if err != nil {
			return 0, err
		}
		best = max(best, n)
	}
	return best, nil
}

// discardHeld drops what every chain and segment generator holds: the store
// was reset, so another process may be handed the same ranges.
func (r *Registry) discardHeld(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.chains {
		c.Discard(cause)
	}
	for _, g := range r.singles {
		g.Discard(cause)
	}
}

// Generator returns the generator for kind ("snowflake",
// "uuidv7", and with a store "chain" and "segment") and name ("" for
// the kind's shared default), building a chain or segment generator on the
// first use of its name. An unknown kind or name wraps
// engine.ErrUnknownGenerator; after Close, engine.ErrClosed.
func (r *Registry) Generator(ctx context.Context, kind, name string) (engine.Generator, error) {
	return r.gens.Generator(ctx, kind, name)
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
	defaultErr  error
)

// Default returns the process-wide registry that the GORM plugin and the
// sqlx helper use when given none, built on first use with Settings{}: a
// snowflake generator on machine.Default() (IDFORGE_MACHINE_ID, a
// StatefulSet ordinal, else the lowest machine ID free on this host — safe
// on one host only), with a local state file in the default state
// directory, and "uuidv7". It has no
// store, so no "chain" or "segment" kind. Services with several replicas should call
// [New] with a store instead.
func Default() (*Registry, error) {
	defaultOnce.Do(func() { defaultReg, defaultErr = New(context.Background(), Settings{}) })
	return defaultReg, defaultErr
}

// NextID draws one ID from the generator for kind and name (see
// [Registry.Generator]).
func (r *Registry) NextID(ctx context.Context, kind, name string) (int64, error) {
	g, err := r.Generator(ctx, kind, name)
	if err != nil {
		return 0, err
	}
	return g.NextID(ctx)
}
