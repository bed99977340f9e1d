package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/metrics"
)

// registrySettings are what serve configures of the registry.
type registrySettings struct {
	// Instance is who holds the machine ID, in its namespace.
	Instance machine.Instance
	Layout   snowflake.Layout
	Store    idforge.Store
	Logger   *slog.Logger
	Zone     *time.Location // of dated chains
}

// registry is the generator registry serve draws from.
type registry interface {
	engine.Provider
	metrics.Source // MachineID and Chains
	Close() error
}

// newRegistry builds the registry on the store: the one place that knows
// the root's constructor.
func newRegistry(ctx context.Context, s registrySettings) (registry, error) {
	set := idforge.Settings{Namespace: s.Instance.Namespace, Instance: s.Instance, Layout: s.Layout, Store: s.Store, Logger: s.Logger, Zone: s.Zone}
	reg, err := idforge.New(ctx, set)
	if err != nil {
		return nil, err // not a nil *Registry in a non-nil interface
	}
	return reg, nil
}
