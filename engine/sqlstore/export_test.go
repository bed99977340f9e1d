package sqlstore

import (
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/schema"
)

// Dialect is the store's SQL dialect, for tests that name it in messages.
func (s *Store) Dialect() schema.Dialect { return s.cfg.Dialect }

// Epoch is the epoch token the store works under: "<Unix ms of its
// creation>.<random hex>".
func (s *Store) Epoch() string { return s.epoch.Token() }

// DefaultResetGrace is the ResetGrace of Settings that give none.
const DefaultResetGrace = storeepoch.DefaultGrace

// AdminOf is the operator's commands on a store already open.
func AdminOf(s *Store) machine.Admin { return admin{s} }
