package machinetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/holding"
	"github.com/idforge/idforge/engine/machine"
)

// memory is the in-memory distributor of [NewMemory]. One mutex makes
// every method atomic.
type memory struct {
	clock clock.Clock
	mu    sync.Mutex
	ns    map[string]map[int64]*row // namespace → machine ID → row
}

// row is one handed-out machine ID.
type row struct {
	holder string         // instance ID, "" when free
	secret machine.Holder // the live holding, "" when free or reverted
	stable bool
	last   int64 // Unix ms
}

// NewMemory returns an empty in-memory machine.Distributor that judges
// expiry by c (clock.System if nil): the reference implementation of the
// contract that [Run] checks, for unit tests of code built on
// distributors. It is not persistent and not shared between processes;
// its Terms say it remembers last timestamps, and it has no server time.
func NewMemory(c clock.Clock) machine.Distributor {
	if c == nil {
		c = clock.System
	}
	return &memory{clock: c, ns: map[string]map[int64]*row{}}
}

// Distribute hands out inst's own ID (refusing a stable inst's ID held live
// by another process), else the lowest free or expired one not stamped
// ahead of the clock, else the lowest never used, else the free one
// stamped least far ahead, else fails with engine.ErrMachineIDOverflow.
func (m *memory) Distribute(_ context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now().UnixMilli()
	cutoff := now - safeGuard.Milliseconds()
	rows := m.ns[inst.Namespace]
	if rows == nil {
		rows = map[int64]*row{}
		m.ns[inst.Namespace] = rows
	}
	limit := int64(1) << machineBits
	take := func(id int64) (machine.State, error) {
		r := rows[id]
		if r == nil {
			r = &row{}
			rows[id] = r
		}
		st := machine.State{MachineID: id, LastTimestamp: r.last, Holder: machine.Holder(rand.Text())}
		r.holder, r.secret, r.stable, r.last = inst.ID, st.Holder, inst.Stable, max(r.last, now)
		return st, nil
	}
	for id, r := range rows {
		switch {
		case r.holder != inst.ID:
			continue
		case inst.Stable && r.secret != "" && r.last > cutoff:
			return machine.State{}, fmt.Errorf("%w: machinetest: %s: %s", engine.ErrInstanceInUse, distcheck.Name(inst.Namespace, inst.ID, inst.Stable), holding.InUse(id, r.secret, r.last, safeGuard))
		case id >= limit:
			r.holder, r.secret = "", "" // held under a wider layout: give it back, pick anew
		default:
			return take(id)
		}
	}
	// The lowest reclaimable ID not stamped ahead of now; failing that, the
	// one stamped least far ahead, kept for when no number is left.
	best, ahead := int64(-1), int64(-1)
	for id, r := range rows {
		if id >= limit || !(r.holder == "" || (!r.stable && r.last <= cutoff)) {
			continue
		}
		switch {
		case r.last <= now:
			if best < 0 || id < best {
				best = id
			}
		case ahead < 0 || r.last < rows[ahead].last || (r.last == rows[ahead].last && id < ahead):
			ahead = id
		}
	}
	if best >= 0 {
		return take(best)
	}
	for id := range limit { // ends within len(rows)+1 steps
		if rows[id] == nil {
			return take(id)
		}
	}
	if ahead >= 0 {
		return take(ahead)
	}
	return machine.State{}, fmt.Errorf("%w: machinetest: namespace %q has all %d machine IDs of %d bits held, none free or silent for %v",
		engine.ErrMachineIDOverflow, inst.Namespace, limit, machineBits, safeGuard)
}

// Guard raises the ID's last timestamp if inst holds it under st.Holder.
func (m *memory) Guard(_ context.Context, inst machine.Instance, st machine.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.held(inst, st, "guard")
	if err != nil {
		return err
	}
	r.last = max(r.last, st.LastTimestamp)
	return nil
}

// Terms are a store's that keeps last timestamps and sets no window and
// no grace.
func (m *memory) Terms() machine.Terms { return machine.Terms{Remembers: true} }

// ServerTime is the zero time: the memory keeps no clock of its own.
func (m *memory) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

// Revert stores the ID's last timestamp, even below what Guard raised it to,
// ends the holding, and frees the ID unless inst is stable.
func (m *memory) Revert(_ context.Context, inst machine.Instance, st machine.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.held(inst, st, "revert")
	if err != nil {
		return err
	}
	r.last, r.secret = st.LastTimestamp, ""
	if !inst.Stable {
		r.holder = ""
	}
	return nil
}

// held returns the row of st.MachineID if inst holds it under st.Holder.
// Callers hold mu.
func (m *memory) held(inst machine.Instance, st machine.State, op string) (*row, error) {
	if err := distcheck.Instance(inst.Namespace, inst.ID); err != nil {
		return nil, err
	}
	r := m.ns[inst.Namespace][st.MachineID]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: machinetest: %s machine ID %d of %s: never handed out", engine.ErrMachineIDLost, op, st.MachineID, distcheck.Name(inst.Namespace, inst.ID, inst.Stable))
	case r.holder != inst.ID:
		return nil, fmt.Errorf("%w: machinetest: %s machine ID %d of %s: held by %q", engine.ErrMachineIDLost, op, st.MachineID, distcheck.Name(inst.Namespace, inst.ID, inst.Stable), r.holder)
	case r.secret != st.Holder:
		return nil, fmt.Errorf("%w: machinetest: %s machine ID %d of %s: %s", engine.ErrMachineIDLost, op, st.MachineID, distcheck.Name(inst.Namespace, inst.ID, inst.Stable), holding.Taken(r.secret, st.Holder))
	}
	return r, nil
}
