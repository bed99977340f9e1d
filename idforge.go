// Package idforge wires the engine into a ready [engine.Registry]: a
// snowflake generator on a machine ID the library distributes (and guards),
// and a segment chain per name drawn from a shared store. The GORM plugin and
// the sqlx helper take their generators from such a registry.
//
//	st, _ := sqlstore.Open(ctx, db, sqlstore.WithCreateTables())
//	reg, err := idforge.New(ctx, idforge.WithStore(st), idforge.WithNamespace("orders"))
//	defer reg.Close() // reverts the machine ID, stops prefetch workers
//
// Registered kinds: "snowflake" (the shared default, name ""), and with a
// store "chain" (a lock-free segment chain per name) and "segment" (a
// synchronous single-segment generator per name).
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
)

// Kinds registered by [New]: the first element of an `idgen` struct tag.
const (
	KindSnowflake = "snowflake"
	KindChain     = "chain"
	KindSegment   = "segment"
)

// Store is a shared store of machine IDs and segments. engine/sqlstore's and
// engine/redisstore's Store implement it.
type Store interface {
	machine.Distributor
	Segment(name string) (segment.Distributor, error)
}

type config struct {
	namespace     string
	instance      *machine.Instance
	distributor   machine.Distributor
	store         Store
	storeSet      bool
	stateDir      string
	layout        snowflake.Layout
	snowflakeOpts []snowflake.Option
	leaseOpts     []machine.Option
	chainOpts     []segment.Option
	logger        *slog.Logger
}

// Option configures [New].
type Option func(*config)

// WithNamespace names the machine-ID space, usually the service name; the
// default is "default". Instances of one service must share it; different
// services may reuse each other's machine IDs.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithInstance sets this registry's identity; the default is
// "hostname:pid/<random>" (machine.HostInstance(namespace, 0) plus a nonce),
// a new unstable instance for every New, so two registries never share a
// machine ID. Give a stable instance (Stable: true, an ID that survives
// restarts, such as a pod name) to keep the machine ID across restarts and to
// make WithStateDir useful.
func WithInstance(inst machine.Instance) Option {
	return func(c *config) { c.instance = &inst }
}

// WithStore draws machine IDs and segments from st. Without it the machine
// ID comes from machine.Default() and only the "snowflake" kind is registered.
// A nil st is an error, not a fallback.
func WithStore(st Store) Option {
	return func(c *config) { c.store, c.storeSet = st, true }
}

// WithMachineDistributor overrides where the machine ID comes from (for
// example machine.StatefulSet() while segments still come from a store).
func WithMachineDistributor(d machine.Distributor) Option {
	return func(c *config) { c.distributor = d }
}

// WithStateDir keeps a local state file per instance in dir, so a restart
// waits out a clock that went back while the process was down even when the
// distributor cannot remember timestamps (machine.LocalState). The file is
// found again only by the same instance ID: use it with a stable WithInstance.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// WithLayout sets the snowflake bit layout; the default is snowflake.Default.
func WithLayout(l snowflake.Layout) Option { return func(c *config) { c.layout = l } }

// WithSnowflakeOptions passes options to every snowflake generator built
// (clock, clock-backwards tolerance).
func WithSnowflakeOptions(opts ...snowflake.Option) Option {
	return func(c *config) { c.snowflakeOpts = append(c.snowflakeOpts, opts...) }
}

// WithLeaseOptions passes options to the machine-ID lease (heartbeat,
// safe-guard duration, clock). The machine bits always follow the layout.
func WithLeaseOptions(opts ...machine.Option) Option {
	return func(c *config) { c.leaseOpts = append(c.leaseOpts, opts...) }
}

// WithChainOptions passes options to every segment chain and segment
// generator built (step, safe distance, TTL...).
func WithChainOptions(opts ...segment.Option) Option {
	return func(c *config) { c.chainOpts = append(c.chainOpts, opts...) }
}

// WithLogger sets the logger for leases and chains; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// New builds a registry: it acquires a machine ID (waiting out the last
// timestamp stored for it), registers the snowflake generator on it, and with
// a store registers chain and segment factories. Close the registry to revert
// the machine ID and stop the chains' workers.
func New(ctx context.Context, opts ...Option) (*engine.Registry, error) {
	c := config{namespace: "default", layout: snowflake.Default, logger: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if err := c.layout.Validate(); err != nil {
		return nil, err
	}
	if c.storeSet && (c.store == nil || reflect.ValueOf(c.store).IsNil()) {
		return nil, fmt.Errorf("%w: idforge: WithStore(nil)", engine.ErrInvalidConfig)
	}
	if err := segment.CheckOptions(c.chainOpts...); err != nil {
		return nil, err // now, not at the first chain draw
	}
	if c.stateDir != "" {
		if err := os.MkdirAll(c.stateDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: idforge: state directory: %v", engine.ErrInvalidConfig, err)
		}
	}
	if c.instance == nil {
		inst, err := machine.HostInstance(c.namespace, 0)
		if err != nil {
			return nil, err
		}
		// Two registries in one process (one per *gorm.DB, one for sqlx...)
		// must not share a machine ID: each is an instance of its own.
		var nonce [4]byte
		_, _ = rand.Read(nonce[:])
		inst.ID += "/" + hex.EncodeToString(nonce[:])
		c.instance = &inst
	}
	if c.distributor == nil {
		if c.store != nil {
			c.distributor = c.store
		} else {
			c.distributor = machine.Default()
		}
	}
	if c.stateDir != "" {
		c.distributor = machine.LocalState(c.stateDir, c.distributor)
	}

	sf, err := newLeasedSnowflake(ctx, &c)
	if err != nil {
		return nil, err
	}
	reg := engine.NewRegistry()
	if err := reg.Register(KindSnowflake, "", sf); err != nil {
		sf.Close()
		return nil, err
	}
	if c.store != nil {
		st, chainOpts := c.store, append([]segment.Option{segment.WithLogger(c.logger)}, c.chainOpts...)
		chain := func(ctx context.Context, name string) (engine.Generator, error) {
			d, err := st.Segment(name)
			if err != nil {
				return nil, err
			}
			return segment.NewChain(d, append([]segment.Option{segment.WithName(name)}, chainOpts...)...)
		}
		single := func(ctx context.Context, name string) (engine.Generator, error) {
			d, err := st.Segment(name)
			if err != nil {
				return nil, err
			}
			return segment.New(d, append([]segment.Option{segment.WithName(name)}, chainOpts...)...)
		}
		if err := errors.Join(reg.RegisterFactory(KindChain, chain), reg.RegisterFactory(KindSegment, single)); err != nil {
			reg.Close()
			return nil, err
		}
	}
	return reg, nil
}

var (
	defaultOnce sync.Once
	defaultReg  *engine.Registry
	defaultErr  error
)

// Default returns the process-wide registry that the GORM plugin and the
// sqlx helper use when given none, built on first use with no options: a
// snowflake generator on machine.Default() (IDFORGE_MACHINE_ID, a
// StatefulSet ordinal, else machine 0 — safe for one instance only).
// Services with several replicas should call [New] with a store instead.
func Default() (*engine.Registry, error) {
	defaultOnce.Do(func() { defaultReg, defaultErr = New(context.Background()) })
	return defaultReg, defaultErr
}

// probeTimeout bounds the store call NextID makes when the lease lapsed, so
// a caller without a deadline does not hang on a store that stopped answering.
const probeTimeout = 5 * time.Second

// leasedSnowflake is a snowflake generator that owns its machine-ID lease.
// When the lease is lost (another instance took the ID over while this one
// stalled) it stops issuing, and the next call acquires a new machine ID
// before issuing again, so a stalled process never collides when it wakes.
type leasedSnowflake struct {
	c       *config
	cur     atomic.Pointer[leased]
	mu      sync.Mutex // serializes re-acquisition
	probing atomic.Bool
}

type leased struct {
	gen   *snowflake.Generator
	lease *machine.Lease
}

// liveInstances are the instances running a leased generator in this
// process: a store hands one instance one machine ID, so two registries built
// with the same WithInstance would issue the same IDs. (Fixed distributors,
// Manual and StatefulSet, refuse a second instance of a namespace themselves.)
var liveInstances = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func instanceKey(inst machine.Instance) string { return inst.Namespace + "\x00" + inst.ID }

func claimInstance(inst machine.Instance) bool {
	liveInstances.Lock()
	defer liveInstances.Unlock()
	if liveInstances.m[instanceKey(inst)] {
		return false
	}
	liveInstances.m[instanceKey(inst)] = true
	return true
}

func releaseInstance(inst machine.Instance) {
	liveInstances.Lock()
	delete(liveInstances.m, instanceKey(inst))
	liveInstances.Unlock()
}

func newLeasedSnowflake(ctx context.Context, c *config) (*leasedSnowflake, error) {
	if !claimInstance(*c.instance) {
		return nil, fmt.Errorf("%w: idforge: instance %s already runs a registry in this process: share that registry, "+
			"or give each New its own WithInstance", engine.ErrInvalidConfig, c.instance)
	}
	s := &leasedSnowflake{c: c}
	l, err := s.acquire(ctx)
	if err != nil {
		releaseInstance(*c.instance)
		return nil, err
	}
	s.cur.Store(l)
	return s, nil
}

func (s *leasedSnowflake) acquire(ctx context.Context) (*leased, error) {
	// The lease heartbeats the generator's newest timestamp, but the
	// generator needs the lease's machine ID first.
	var genp atomic.Pointer[snowflake.Generator]
	opts := append([]machine.Option{
		machine.WithMachineBits(s.c.layout.MachineBits),
		machine.WithLogger(s.c.logger),
		machine.WithTimestampSource(func() int64 {
			if g := genp.Load(); g != nil {
				return g.LastTimestamp()
			}
			return 0
		}),
	}, s.c.leaseOpts...)
	lease, err := machine.Acquire(ctx, s.c.distributor, *s.c.instance, opts...)
	if err != nil {
		return nil, fmt.Errorf("idforge: acquire machine ID for %s: %w", s.c.instance, err)
	}
	if lease.Reservation() > 0 {
		// The stored timestamp is up to a reservation ahead of the clock,
		// more than the generator itself waits out at start-up.
		if err := lease.WaitOut(ctx); err != nil {
			lease.Close()
			return nil, err
		}
	}
	gen, err := snowflake.New(lease.MachineID(), append([]snowflake.Option{
		snowflake.WithLayout(s.c.layout),
		snowflake.WithLastTimestamp(lease.State().LastTimestamp),
		snowflake.WithFence(lease),
	}, s.c.snowflakeOpts...)...)
	if err != nil {
		lease.Close()
		return nil, err
	}
	genp.Store(gen)
	return &leased{gen: gen, lease: lease}, nil
}

// NextID issues a snowflake ID. If the lease lapsed it first asks the store
// whether the machine ID is still this instance's, and if it was lost it
// acquires a new one, once, before issuing.
func (s *leasedSnowflake) NextID(ctx context.Context) (int64, error) {
	l := s.cur.Load()
	if l == nil {
		return 0, engine.ErrClosed
	}
	id, err := l.gen.NextID(ctx)
	if err == nil || !errors.Is(err, engine.ErrMachineIDLost) {
		return id, err
	}
	if l.lease.Err() == nil {
		// The lease lapsed without news: the process stalled or the store is
		// away. One caller asks the store now instead of waiting for the next
		// scheduled heartbeat; the others fail fast meanwhile.
		if !s.probing.CompareAndSwap(false, true) {
			return 0, err
		}
		// In a goroutine: Heartbeat may first wait for a scheduled heartbeat
		// that hangs on the store, and the caller's ctx must still end the wait.
		probe := make(chan error, 1)
		go func() {
			defer s.probing.Store(false)
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
			defer cancel()
			probe <- l.lease.Heartbeat(hctx)
		}()
		var herr error
		select {
		case herr = <-probe:
		case <-ctx.Done():
			return 0, errors.Join(err, ctx.Err())
		}
		if herr == nil {
			return l.gen.NextID(ctx)
		}
		if l.lease.Err() == nil {
			return 0, errors.Join(err, herr)
		}
	}
	if rerr := s.replace(ctx, l); rerr != nil {
		return 0, errors.Join(err, rerr)
	}
	if l = s.cur.Load(); l == nil {
		return 0, engine.ErrClosed
	}
	return l.gen.NextID(ctx)
}

// replace swaps a lost lease for a new one, unless another caller already did.
func (s *leasedSnowflake) replace(ctx context.Context, lost *leased) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != lost {
		return nil
	}
	lost.lease.Close() // stops its heartbeat; the ID is no longer ours to revert
	next, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	s.c.logger.Warn("idforge: machine ID lost, continuing on a new one",
		"instance", s.c.instance.String(), "old", lost.gen.MachineID(), "new", next.gen.MachineID())
	s.cur.Store(next)
	return nil
}

// MachineID reports the machine ID currently in use.
func (s *leasedSnowflake) MachineID() int64 {
	if l := s.cur.Load(); l != nil {
		return l.gen.MachineID()
	}
	return -1
}

// Close reverts the machine ID (saving the last timestamp) and stops the heartbeat.
func (s *leasedSnowflake) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.cur.Swap(nil)
	if l == nil {
		return nil
	}
	releaseInstance(*s.c.instance)
	return l.lease.Close()
}
