package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
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

// newRegistry builds the registry on the store: the one place that knows
// the root's constructor.
func newRegistry(ctx context.Context, s registrySettings) (*idforge.Registry, error) {
	set := idforge.Settings{Namespace: s.Instance.Namespace, Instance: s.Instance, Layout: s.Layout, Store: s.Store, Logger: s.Logger, Zone: s.Zone}
	return idforge.New(ctx, set)
}
