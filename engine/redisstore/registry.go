package redisstore

import (
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// MachineDistributor returns Machine() as a machine.Distributor, so a Store
// can be passed to idforge.WithStore.
func (s *Store) MachineDistributor() machine.Distributor { return s.Machine() }

// SegmentDistributor returns Segment(name) as a segment.Distributor, so a
// Store can be passed to idforge.WithStore.
func (s *Store) SegmentDistributor(name string) (segment.Distributor, error) {
	return s.Segment(name), nil
}
