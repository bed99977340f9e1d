package snowflake

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/snowhook"
)

func init() {
	snowhook.New = newOnLease
	snowhook.LayoutOf = func(l any) snowhook.Layout { return layoutOps{l.(Layout)} }
}

// layoutOps hands a layout's private arithmetic to internal/snowlayout.
type layoutOps struct{ l Layout }

func (o layoutOps) Describe() string              { return o.l.describe() }
func (o layoutOps) MaxMachineID() int64           { return o.l.maxMachineID() }
func (o layoutOps) MaxSequence() int64            { return o.l.maxSequence() }
func (o layoutOps) MaxTick() int64                { return o.l.maxTick() }
func (o layoutOps) MaxID() int64                  { return o.l.maxID() }
func (o layoutOps) TickTime(tick int64) time.Time { return o.l.tickTime(tick) }
func (o layoutOps) Overflow(t time.Time) error    { return o.l.overflow(t) }

// onLease is a generator as the lease composition sees it: with its newest
// timestamp and its clock-wait count, which users do not get.
type onLease struct{ *Generator }

// MachineID returns the machine ID the generator issues under.
func (g onLease) MachineID() int64 { return g.machine }

// LastTimestamp returns the tick of the newest ID in Unix milliseconds.
func (g onLease) LastTimestamp() int64 { return g.lastTimestamp() }

// BackwardsWaits returns how many NextID calls waited out a clock step back.
func (g onLease) BackwardsWaits() int64 { return g.waits() }

// newOnLease builds a generator on a machine-ID lease (see internal/snowhook).
func newOnLease(machineID int64, settings any, start snowhook.Start) (snowhook.Generator, error) {
	s, ok := settings.(Settings)
	if !ok {
		return nil, fmt.Errorf("%w: snowhook.New wants snowflake.Settings, got %T", engine.ErrInvalidConfig, settings)
	}
	g, err := newGenerator(machineID, s, start)
	if err != nil {
		return nil, err
	}
	return onLease{g}, nil
}
