package redisstore

import (
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
)

// Key names and defaults the tests read or write behind the store's back.
const (
	DefaultPrefix     = defaultPrefix
	DefaultResetGrace = storeepoch.DefaultGrace
)

// EpochKey is the key holding the store's epoch token.
func (s *Store) EpochKey() string { return s.epochKey() }

// SegmentKey is the key holding the last max ID of the segment name.
func (s *Store) SegmentKey(name string) string { return s.segmentKey(name) }

// Epoch is the epoch token the store works under: "<Unix ms of its
// creation>.<random hex>".
func (s *Store) Epoch() string { return s.epoch.Token() }

// AdminOf is the operator's commands on a store already open.
func AdminOf(s *Store) machine.Admin { return admin{s} }
