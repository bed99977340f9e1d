package main

import (
	"context"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
)

// registrySettings are what serve configures of the registry.
type registrySettings struct {
	Namespace string
	// Instance, when not empty, is a stable instance ID.
	Instance string
	Layout   snowflake.Layout
	Store    store
}

// registry is the generator registry serve draws from.
type registry interface {
	engine.Provider
	MachineID() int64
	Close() error
}

// newRegistry builds the registry on st: the one place that knows the
// root's constructor.
// TODO(root): idforge.New(ctx, idforge.Settings{Namespace, Layout, Store}) once it lands.
func newRegistry(ctx context.Context, s registrySettings) (registry, error) {
	opts := []idforge.Option{
		idforge.WithNamespace(s.Namespace),
		idforge.WithLayout(s.Layout),
		idforge.WithStore(&legacyStore{s.Store}),
	}
	if s.Instance != "" {
		opts = append(opts, idforge.WithInstance(machine.Instance{Namespace: s.Namespace, ID: s.Instance, Stable: true}))
	}
	reg, err := idforge.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return legacyRegistry{reg}, nil
}

type legacyStore struct{ st store }

func (l legacyStore) MachineDistributor() machine.Distributor { return l.st }
func (l legacyStore) SegmentDistributor(name string) (segment.Distributor, error) {
	return l.st.Segment(name)
}

type legacyRegistry struct{ *engine.Registry }

func (r legacyRegistry) MachineID() int64 {
	g, err := r.Generator(context.Background(), idforge.KindSnowflake, "")
	if err != nil {
		return -1
	}
	if m, ok := g.(interface{ MachineID() int64 }); ok {
		return m.MachineID()
	}
	return -1
}
