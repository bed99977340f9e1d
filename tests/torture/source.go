package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/idforge/idforge/internal/genreg"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	idforge "github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/leased"
)

// chainName is the one segment sequence every worker draws from.
const chainName = "torture"

// breakModes are the values of the test-only -break flag. Each swaps the
// worker's ID source for a deliberately broken one, built from the library's
// parts without changing the library, so a test can show that the checks
// catch the bug:
//
//   - machine: every worker issues on the fixed machine ID 1 (machine.Manual),
//     as if machine-ID distribution were disabled;
//   - fence: the snowflake generator runs on the leased machine ID without
//     the lease's fence and never moves to a new ID, so a worker paused past
//     the safe-guard goes on issuing under the ID an intruder reclaimed;
//   - clock: a clock step back too long to wait out is not refused: the
//     generator starts over, forgetting the last timestamp it used, as if the
//     clock-backwards check were removed;
//   - partition: the chains run without their Fence (the driver passes
//     none), so a worker cut off from a store that partition_wipe empties
//     goes on serving the ranges it held, which the newcomer is handed again.
var breakModes = []string{"", "machine", "fence", "clock", "partition"}

// brokenMachineID is the machine ID every worker shares under -break machine.
const brokenMachineID = 1

// source is where a worker's IDs come from: the registry idforge.New
// builds, or behind -break a broken stand-in.
type source struct {
	gens      map[string]engine.Generator
	machineID func() int64
	close     func() error
}

func (w *worker) open(ctx context.Context, inst machine.Instance) (*source, error) {
	// A worker restarted with its clock offset differs from the store's
	// clock by that much, and Acquire refuses a clock further off than the
	// skew margin (by default a fifth of the safe-guard, less than the
	// offset): the margin covers it.
	var margin time.Duration
	if off := w.cfg.ClockOffset; off != 0 {
		margin = max(off, -off) + w.cfg.SafeGuard/5
	}
	leaseOpts := leased.LeaseSettings{SafeGuard: w.cfg.SafeGuard, Heartbeat: w.cfg.Heartbeat, SkewMargin: margin, Clock: w.clk, Logger: w.log, Reservation: storeWindow(w.cfg.RideThrough)}
	sfOpts := snowflake.Settings{Clock: w.clk, MaxBackwards: w.cfg.MaxBackwards}
	chainSet := segment.Settings{MaxWait: chainMaxWait, Fence: w.cfg.Fence, Ahead: w.cfg.Ahead}
	if w.cfg.Break == "fence" || w.cfg.Break == "clock" {
		return w.openBroken(ctx, inst, leaseOpts, sfOpts, chainSet)
	}
	st := w.store
	if w.cfg.RideThrough == 0 {
		// -ride-through 0: no reservation (the stores' RideThrough is
		// negative), the control that shows why it is there. Acquire refuses a lease without a reservation against the store's
		// reset grace; this control is about restarts, not resets.
		st = graceHidden{st}
	}
	set := idforge.Settings{
		Store:     st,
		Namespace: inst.Namespace,
		Instance:  inst,
		Snowflake: snowflake.Settings{Clock: w.clk, MaxBackwards: w.cfg.MaxBackwards},
		Lease:     machine.Settings{SafeGuard: w.cfg.SafeGuard, Heartbeat: w.cfg.Heartbeat, SkewMargin: margin},
		Chain:     chainSet,
		Logger:    w.log,
	}
	if w.cfg.Break == "machine" {
		set.Machine = machine.Manual(brokenMachineID)
		// A state file per worker, so the workers do not wait out each
		// other's timestamps: the break is sharing the machine ID.
		set.StateDir = filepath.Join(os.TempDir(), fmt.Sprintf("idforge-torture-break-%d-%d", os.Getpid(), w.cfg.Proc))
	}
	reg, err := idforge.New(ctx, set)
	if err != nil {
		return nil, err
	}
	reg.AddFloor(chainName, w.chainFloor) // as the GORM plugin would, from the rows
	sf, err := reg.Generator(ctx, genreg.Snowflake, "")
	if err != nil {
		reg.Close()
		return nil, err
	}
	ch, err := reg.Generator(ctx, genreg.Chain, chainName)
	if err != nil {
		reg.Close()
		return nil, err
	}
	return &source{
		gens:      map[string]engine.Generator{genSnowflake: sf, genChain: ch},
		machineID: func() int64 { return reg.Stats().MachineID },
		close: func() error {
			if set.StateDir != "" {
				defer os.RemoveAll(set.StateDir)
			}
			return reg.Close()
		},
	}, nil
}

// openBroken builds the -break fence and -break clock sources by hand: a
// machine-ID lease, a snowflake generator on its ID and a segment chain.
func (w *worker) openBroken(ctx context.Context, inst machine.Instance, leaseOpts leased.LeaseSettings,
	sfOpts snowflake.Settings, chainSet segment.Settings) (*source, error) {
	b := &brokenSnowflake{forget: w.cfg.Break == "clock"}
	leaseOpts.TimestampSource = func() int64 {
		if g := b.gen.Load(); g != nil {
			return (*g).LastTimestamp()
		}
		return 0
	}
	lease, err := leased.Acquire(ctx, w.store, inst, leaseOpts)
	if err != nil {
		return nil, err
	}
	if b.forget {
		b.fence = lease.Check // only the clock check is broken
	}
	b.opts, b.machine = sfOpts, lease.MachineID()
	g, err := snowflake.Resume(b.machine, sfOpts, lease.State().LastTimestamp, b.fence)
	if err != nil {
		lease.Close()
		return nil, err
	}
	b.gen.Store(g)
	d, err := w.store.Segment(chainName, w.chainFloor)
	if err != nil {
		lease.Close()
		return nil, err
	}
	// What idforge.New sets on its chains: the fence then reads the clock
	// the store dates its confirmations with.
	cg, err := chain.New(d, chainSet, chain.Owned{Name: chainName, Clock: w.clk, Logger: w.log})
	if err != nil {
		lease.Close()
		return nil, err
	}
	ch := cg
	return &source{
		gens:      map[string]engine.Generator{genSnowflake: b, genChain: ch},
		machineID: lease.MachineID,
		close:     func() error { return errors.Join(ch.Close(), lease.Close()) },
	}, nil
}

// brokenSnowflake is the snowflake generator of -break fence and -break clock.
type brokenSnowflake struct {
	gen     atomic.Pointer[snowflake.Generator]
	opts    snowflake.Settings
	machine int64
	fence   func(unixMilli int64) error
	forget  bool // clock: a refused clock step starts a generator that forgot its last timestamp
}

func (b *brokenSnowflake) NextID(ctx context.Context) (int64, error) {
	g := b.gen.Load()
	id, err := g.NextID(ctx)
	if err == nil || !b.forget || !errors.Is(err, engine.ErrClockBackwards) {
		return id, err
	}
	fresh, nerr := snowflake.Resume(b.machine, b.opts, 0, b.fence)
	if nerr != nil {
		return 0, errors.Join(err, nerr)
	}
	b.gen.CompareAndSwap(g, fresh)
	return b.gen.Load().NextID(ctx)
}

// graceHidden hides the store's reset grace (machine.Terms.ResetGrace) from
// leased.Acquire, for the -ride-through 0 control; its other terms (no
// ride-through window) go through.
type graceHidden struct{ idforge.Store }

// Terms are the store's without its reset grace.
func (g graceHidden) Terms() machine.Terms {
	t := g.Store.Terms()
	t.ResetGrace = 0
	return t
}

// chainFloor is the chain's Floor: the largest ID in its table, where a
// store that forgot the sequence must start it above.
func (w *worker) chainFloor(ctx context.Context, _ string) (int64, error) {
	var n sql.NullInt64
	err := w.rows.db.QueryRowContext(ctx, "SELECT MAX(id) FROM "+tableOf(genChain)).Scan(&n)
	return n.Int64, err
}
