package machinetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
)

// Memory is an in-memory machine.Distributor: the reference implementation
// of the contract that [Run] checks, for unit tests of code built on
// distributors. One mutex makes every method atomic. It is not persistent
// and not shared between processes.
type Memory struct {
	clock clock.Clock
	mu    sync.Mutex
	ns    map[string]map[int64]*row // namespace → machine ID → row
}

// row is one handed-out machine ID.
type row struct {
	holder string // instance ID, "" when free
	stable bool
	last   int64 // Unix ms
}

// NewMemory returns an empty in-memory distributor that judges expiry by c
// (clock.System if nil).
func NewMemory(c clock.Clock) *Memory {
	if c == nil {
		c = clock.System
	}
	return &Memory{clock: c, ns: map[string]map[int64]*row{}}
}

// Distribute hands out inst's own ID, else the lowest free or expired one,
// else the lowest never used, else fails with engine.ErrMachineIDOverflow.
func (m *Memory) Distribute(_ context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := machine.ValidateDistribute(inst, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now().UnixMilli()
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
		st := machine.State{MachineID: id, LastTimestamp: r.last}
		r.holder, r.stable, r.last = inst.ID, inst.Stable, max(r.last, now)
		return st, nil
	}
	for id, r := range rows {
		if r.holder != inst.ID {
			continue
		}
		if id < limit {
			return take(id)
		}
		r.holder = "" // held under a wider layout: give it back, pick anew
	}
	cutoff := now - safeGuard.Milliseconds()
	reclaim := int64(-1)
	for id, r := range rows {
		if id < limit && (r.holder == "" || (!r.stable && r.last <= cutoff)) && (reclaim < 0 || id < reclaim) {
			reclaim = id
		}
	}
	if reclaim >= 0 {
		return take(reclaim)
	}
	for id := range limit { // ends within len(rows)+1 steps
		if rows[id] == nil {
			return take(id)
		}
	}
	return machine.State{}, fmt.Errorf("%w: machinetest: namespace %q has all %d machine IDs of %d bits held, none free or silent for %v",
		engine.ErrMachineIDOverflow, inst.Namespace, limit, machineBits, safeGuard)
}

// Guard raises the ID's last timestamp if inst holds it.
func (m *Memory) Guard(_ context.Context, inst machine.Instance, st machine.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.held(inst, st, "guard")
	if err != nil {
		return err
	}
	r.last = max(r.last, st.LastTimestamp)
	return nil
}

// Revert stores the ID's last timestamp, even below what Guard raised it to,
// and frees the ID unless inst is stable.
func (m *Memory) Revert(_ context.Context, inst machine.Instance, st machine.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.held(inst, st, "revert")
	if err != nil {
		return err
	}
	r.last = st.LastTimestamp
	if !inst.Stable {
		r.holder = ""
	}
	return nil
}

// held returns the row of st.MachineID if inst holds it. Callers hold mu.
func (m *Memory) held(inst machine.Instance, st machine.State, op string) (*row, error) {
	if err := inst.Validate(); err != nil {
		return nil, err
	}
	r := m.ns[inst.Namespace][st.MachineID]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: machinetest: %s machine ID %d of %s: never handed out", engine.ErrMachineIDLost, op, st.MachineID, inst)
	case r.holder != inst.ID:
		return nil, fmt.Errorf("%w: machinetest: %s machine ID %d of %s: held by %q", engine.ErrMachineIDLost, op, st.MachineID, inst, r.holder)
	}
	return r, nil
}

// MustDistribute distributes a machine ID to inst from d, failing the test
// on an error: the common first step of store tests.
func MustDistribute(t testing.TB, d machine.Distributor, inst machine.Instance, bits int, safeGuard time.Duration) machine.State {
	t.Helper()
	st, err := d.Distribute(context.Background(), inst, bits, safeGuard)
	if err != nil {
		t.Fatalf("Distribute(%s): %v", inst.ID, err)
	}
	return st
}
