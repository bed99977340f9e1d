package leased

import (
	"fmt"
	"sync"

	"github.com/idforge/idforge/engine"
)

// holders is the process-wide record of the leases alive in this process,
// by namespace and machine ID: the one same-instance guard. A store hands
// an instance that asks twice the same machine ID, and [machine.Manual] and
// [machine.StatefulSet] hand every instance the same one, so two leases of one
// process could otherwise run generators on one machine ID and issue the
// same IDs (two registries built alike, say). It is process-wide by nature:
// the IDs two leases of one process issue collide whatever values hold them.
// Across processes, the store (or, for fixed IDs, the operator) keeps
// machine IDs apart.
var holders = struct {
	sync.Mutex
	m map[holderKey]*Lease
}{m: map[holderKey]*Lease{}}

type holderKey struct {
	namespace string
	id        int64
}

// hold records l as the holder of its machine ID in this process. A lease
// already there that still confirms its ID (its window or reservation has
// not run out) refuses l; one that lapsed no longer issues and gives way,
// as it would to another process reclaiming the ID.
func hold(l *Lease, now int64) error {
	holders.Lock()
	defer holders.Unlock()
	k := holderKey{l.inst.Namespace, l.state.MachineID}
	if h := holders.m[k]; h != nil && h.Check(now) == nil {
		return fmt.Errorf("%w: machine: machine ID %d of namespace %q is held by instance %q of this process; "+
			"share its generator (one registry per process), or give each its own instance with a store",
			engine.ErrInvalidConfig, l.state.MachineID, l.inst.Namespace, h.inst.ID)
	}
	holders.m[k] = l
	return nil
}

// release forgets l as a holder, if it still is one.
func release(l *Lease) {
	holders.Lock()
	defer holders.Unlock()
	if k := (holderKey{l.inst.Namespace, l.state.MachineID}); holders.m[k] == l {
		delete(holders.m, k)
	}
}
