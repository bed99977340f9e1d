// Package leased keeps machine IDs and runs a snowflake generator on one:
// [Acquire] leases a machine ID from a machine.Distributor (heartbeats,
// fencing, reverting on Close), [LocalState] remembers the last timestamp
// in a local file across restarts, and [New] runs a snowflake generator on
// a lease and keeps it running when the lease is lost: the
// generator stops issuing the moment its machine ID may be someone else's,
// and the next call acquires a new machine ID and goes on above every
// timestamp the old generator used.
//
// It owns the invariants between the lease and the generator: the layout
// decides the machine bits, the lease is the generator's fence, and the
// generator's newest timestamp is what the lease heartbeats. [Settings]
// cannot change them; a setting that contradicts one is refused with
// engine.ErrInvalidConfig naming both fields. The root package idforge is
// its user; it imports engine and its generator packages.
package leased

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
)

// Settings configures [New]. The zero value of every field but Distributor
// and Instance means its documented default.
type Settings struct {
	// Distributor hands out the machine ID (required).
	Distributor machine.Distributor
	// Instance is who holds the lease (required).
	Instance machine.Instance
	// Snowflake configures the generator (snowflake.Resume takes it as it
	// is): its Layout (default snowflake.Default), whose machine bits are
	// the lease's; its Clock (default clock.System), the time source of the
	// generator and the lease, which both run on one clock.Steady time base
	// of it, kept across the leases a Snowflake goes through; and
	// MaxBackwards.
	Snowflake snowflake.Settings
	// Lease tunes the lease: heartbeat, safe-guard, skew margin. The
	// reservation is the store's ride-through window. The machine bits, clock, logger and timestamp source of
	// the lease are the composition's: the layout's, Snowflake.Clock, Logger
	// and the generator's newest timestamp.
	Lease machine.Settings
	// Reservation overrides the store's ride-through window as the lease's
	// reservation (see [LeaseSettings].Reservation): 0 takes the store's;
	// negative, none. Tests set it.
	Reservation time.Duration
	// Logger receives lease events (default slog.Default()).
	Logger *slog.Logger
	// OnReset, when set, is called (from a goroutine of the lease) when a
	// lease ends because the store was reset (engine.ErrStoreReset): what
	// else was drawn from that store may now be handed out again, and the
	// caller should drop it. The generator itself already refuses.
	OnReset func(err error)
}

// probeTimeout bounds the store call NextID makes when the lease lapsed, so
// a caller without a deadline does not hang on a store that stopped answering.
const probeTimeout = 5 * time.Second

// Snowflake is a snowflake generator that owns its machine-ID lease. It is
// safe for concurrent use.
type Snowflake struct {
	set     Settings
	cur     atomic.Pointer[held]
	mu      sync.Mutex // serializes re-acquisition and Close
	probing atomic.Bool
	lost    atomic.Int64
	last    int64 // the newest timestamp of every generator replaced; under mu
}

type held struct {
	gen   *snowflake.Generator
	lease *Lease
}

var _ engine.Generator = (*Snowflake)(nil)

// New acquires a machine ID, waits out what its previous holder may have
// issued (the stored last timestamp, a reservation included) and returns a
// generator on it.
func New(ctx context.Context, s Settings) (*Snowflake, error) {
	if err := s.resolve(); err != nil {
		return nil, err
	}
	sf := &Snowflake{set: s}
	h, err := sf.acquire(ctx)
	if err != nil {
		return nil, err
	}
	sf.cur.Store(h)
	return sf, nil
}

func (s *Settings) resolve() error {
	if s.Snowflake.Layout == (snowflake.Layout{}) {
		s.Snowflake.Layout = snowflake.Default
	}
	if err := s.Snowflake.Layout.Validate(); err != nil {
		return err
	}
	if s.Snowflake.Clock == nil {
		s.Snowflake.Clock = clock.System
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{engine.ErrInvalidConfig}, args...)...)
	}
	if s.Distributor == nil {
		return bad("leased: Settings.Distributor is nil")
	}
	s.Snowflake.Clock = clock.Steady(s.Snowflake.Clock)
	return s.Instance.Validate()
}

// acquire leases a machine ID and builds a generator on it that issues only
// after every timestamp already used: the store's (with its reservation) and
// that of every generator this Snowflake ran before, whatever the store says.
func (s *Snowflake) acquire(ctx context.Context) (*held, error) {
	// The lease heartbeats the generator's newest timestamp, but the
	// generator needs the lease's machine ID first.
	var genp atomic.Pointer[snowflake.Generator]
	ls := LeaseSettings{Lease: s.set.Lease, Reservation: s.set.Reservation}
	// A distributor hands out at least one bit's worth of IDs (and reads 0
	// as its default width): an ID beyond the layout is refused below.
	ls.MachineBits = max(s.set.Snowflake.Layout.MachineBits, 1)
	ls.Clock = s.set.Snowflake.Clock
	ls.Logger = s.set.Logger
	ls.TimestampSource = func() int64 {
		if g := genp.Load(); g != nil {
			return g.LastTimestamp()
		}
		return 0
	}
	lease, err := Acquire(ctx, s.set.Distributor, s.set.Instance, ls)
	if err != nil {
		return nil, err
	}
	if id := lease.MachineID(); s.set.Snowflake.Layout.MachineBits == 0 && id > 0 {
		lease.Close()
		return nil, fmt.Errorf("%w: namespace %q: layout %s has no machine bits, so machine ID 0 is its only one, and machine ID %d was handed out (another instance holds 0, or a fixed ID was set)",
			engine.ErrMachineIDOverflow, s.set.Instance.Namespace, s.set.Snowflake.Layout, id)
	}
	if lease.Reservation() > 0 {
		// The stored timestamp is up to a reservation ahead of the clock,
		// more than the generator itself waits out at start-up.
		if err := lease.WaitOut(ctx); err != nil {
			lease.Close()
			return nil, err
		}
	}
	gen, err := snowflake.Resume(lease.MachineID(), s.set.Snowflake, max(lease.State().LastTimestamp, s.last), lease.Check)
	if err != nil {
		lease.Close()
		return nil, err
	}
	genp.Store(gen)
	if s.set.OnReset != nil {
		go s.watch(lease)
	}
	return &held{gen: gen, lease: lease}, nil
}

// watch tells OnReset when lease ends because the store was reset.
func (s *Snowflake) watch(lease *Lease) {
	<-lease.Lost()
	if err := lease.Err(); errors.Is(err, engine.ErrStoreReset) {
		s.set.OnReset(err)
	}
}

// NextID issues a snowflake ID. If the lease lapsed it first asks the store
// whether the machine ID is still this instance's, and if it was lost it
// acquires a new one, once, before issuing.
func (s *Snowflake) NextID(ctx context.Context) (int64, error) {
	h := s.cur.Load()
	if h == nil {
		return 0, fmt.Errorf("%w: snowflake of %s", engine.ErrClosed, instanceName(s.set.Instance.Namespace, s.set.Instance.ID, s.set.Instance.Stable))
	}
	id, err := h.gen.NextID(ctx)
	if err == nil || !errors.Is(err, engine.ErrMachineIDLost) {
		return id, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if h.lease.Err() == nil {
		// The lease lapsed without news: the process stalled or the store is
		// away. One caller asks the store now instead of waiting for the next
		// scheduled heartbeat; the others fail fast meanwhile.
		if !s.probing.CompareAndSwap(false, true) {
			return 0, err
		}
		// In a goroutine: Heartbeat may first wait for a scheduled heartbeat
		// that hangs on the store, and the caller's ctx must still end the wait.
		probe, lease := make(chan error, 1), h.lease // h itself escaping would cost an allocation per ID
		go func() {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
			herr := lease.Heartbeat(hctx)
			cancel()
			// Done probing before the caller hears of it: its next
			// NextID, if refused, must ask the store again, not fail fast
			// on a probe that is over.
			s.probing.Store(false)
			probe <- herr
		}()
		var herr error
		select {
		case herr = <-probe:
		case <-ctx.Done():
			return 0, errors.Join(err, ctx.Err())
		}
		if herr == nil {
			return h.gen.NextID(ctx)
		}
		if h.lease.Err() == nil {
			// Asked again, now that the lease knows the store did not
			// answer, the refusal says so (and carries herr).
			id, err := h.gen.NextID(ctx)
			if err == nil || errors.Is(err, engine.ErrStoreUnavailable) {
				return id, err
			}
			return 0, errors.Join(err, herr)
		}
	}
	if rerr := s.replace(ctx, h); rerr != nil {
		return 0, errors.Join(err, rerr)
	}
	if h = s.cur.Load(); h == nil {
		return 0, fmt.Errorf("%w: snowflake of %s", engine.ErrClosed, instanceName(s.set.Instance.Namespace, s.set.Instance.ID, s.set.Instance.Stable))
	}
	return h.gen.NextID(ctx)
}

// replace swaps a lost lease for a new one, unless another caller already did.
func (s *Snowflake) replace(ctx context.Context, lost *held) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != lost {
		return nil
	}
	lost.lease.Close() // stops its heartbeat; the ID is no longer ours to revert
	s.last = max(s.last, lost.gen.LastTimestamp())
	next, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	s.lost.Add(1)
	s.set.Logger.Warn("idforge: machine ID lost, continuing on a new one",
		"namespace", s.set.Instance.Namespace, "instance", s.set.Instance.ID, "stable", s.set.Instance.Stable, "old", lost.lease.MachineID(), "new", next.lease.MachineID())
	s.cur.Store(next)
	return nil
}

// MachineID reports the machine ID in use, -1 after Close.
func (s *Snowflake) MachineID() int64 {
	if h := s.cur.Load(); h != nil {
		return h.lease.MachineID()
	}
	return -1
}

// Lost counts the leases lost and replaced so far.
func (s *Snowflake) Lost() int64 { return s.lost.Load() }

// Lease returns the lease in use, nil after Close: for monitoring.
func (s *Snowflake) Lease() *Lease {
	if h := s.cur.Load(); h != nil {
		return h.lease
	}
	return nil
}

// Close reverts the machine ID (saving the last timestamp) and stops the heartbeat.
func (s *Snowflake) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.cur.Swap(nil)
	if h == nil {
		return nil
	}
	return h.lease.Close()
}
