// Package genreg is the one cache of generators by kind and name, and the
// names of the kinds ([Snowflake], [Chain], [Segment], [UUIDv7]): the root
// registry keeps its generators in one, and tests and the CLI build small
// providers with it. It imports engine only.
package genreg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/idforge/idforge/engine"
)

// Factory builds the generator for one name of a kind, for example the
// segment chain of kind "chain" named "order". The registry calls it once per
// name and caches the result.
type Factory func(ctx context.Context, name string) (engine.Generator, error)

// ErrDuplicateGenerator: a kind or name is registered twice.
var ErrDuplicateGenerator = errors.New("idforge: generator already registered")

var _ engine.Provider = (*Registry)(nil)

type genKey struct{ kind, name string }

// Registry is the named generator provider: a shared default per kind plus one generator per name.
// A generator is found by kind ("snowflake", "chain", "segment"...) and name;
// the empty name is the kind's shared default. Kinds registered with a
// [Factory] create their named generators on first use.
//
// Struct tags refer to registry entries: `idgen:"chain,name=order"` asks for
// kind "chain", name "order". A Registry is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	gens      map[genKey]engine.Generator
	factories map[string]Factory
	creating  map[genKey]*creation // factory calls in flight
	closed    bool
}

// creation is one factory call that concurrent lookups of the same name wait for.
type creation struct {
	done chan struct{}
	g    engine.Generator
	err  error
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{gens: map[genKey]engine.Generator{}, factories: map[string]Factory{}, creating: map[genKey]*creation{}}
}

// Register adds g under kind and name ("" for the kind's shared default).
func (r *Registry) Register(kind, name string, g engine.Generator) error {
	if kind == "" || g == nil {
		return fmt.Errorf("%w: Register needs a kind and a generator", engine.ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return engine.ErrClosed
	}
	k := genKey{kind, name}
	if _, ok := r.gens[k]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateGenerator, k)
	}
	r.gens[k] = g
	return nil
}

// RegisterFactory makes kind available for any name: the first lookup of a
// name the registry does not hold yet calls f.
func (r *Registry) RegisterFactory(kind string, f Factory) error {
	if kind == "" || f == nil {
		return fmt.Errorf("%w: RegisterFactory needs a kind and a factory", engine.ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return engine.ErrClosed
	}
	if _, ok := r.factories[kind]; ok {
		return fmt.Errorf("%w: factory for kind %q", ErrDuplicateGenerator, kind)
	}
	r.factories[kind] = f
	return nil
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for k := range r.factories {
		out = append(out, k)
	}
	for k := range r.gens {
		out = append(out, k.kind)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Generator returns the generator for kind and name, creating it with the
// kind's factory if needed. An unknown kind or name wraps [engine.ErrUnknownGenerator].
func (r *Registry) Generator(ctx context.Context, kind, name string) (engine.Generator, error) {
	k := genKey{kind, name}
	r.mu.RLock()
	g, ok := r.gens[k]
	f := r.factories[kind]
	closed := r.closed
	r.mu.RUnlock()
	switch {
	case ok:
		return g, nil
	case closed:
		return nil, engine.ErrClosed
	case f == nil:
		return nil, fmt.Errorf("%w: %s (registered kinds: %v)", engine.ErrUnknownGenerator, k, r.Kinds())
	}
	r.mu.Lock()
	if g, ok := r.gens[k]; ok {
		r.mu.Unlock()
		return g, nil
	}
	if c, ok := r.creating[k]; ok { // another caller is building it: wait for that
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.g, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &creation{done: make(chan struct{})}
	r.creating[k] = c
	r.mu.Unlock()
	defer close(c.done)

	// Build outside the lock: a factory may talk to a store.
	g, err := f(ctx, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.creating, k)
	switch {
	case err != nil:
		c.err = fmt.Errorf("idforge: create generator %s: %w", k, err)
	case r.closed:
		closeGenerator(g)
		c.err = engine.ErrClosed
	default:
		r.gens[k] = g
		c.g = g
	}
	return c.g, c.err
}

// NextID draws one ID from the generator for kind and name.
func (r *Registry) NextID(ctx context.Context, kind, name string) (int64, error) {
	g, err := r.Generator(ctx, kind, name)
	if err != nil {
		return 0, err
	}
	return g.NextID(ctx)
}

// Close closes every generator the registry holds that implements io.Closer
// (segment chains stop their prefetch workers, machine-ID leases are
// reverted) and refuses further lookups.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	gens := r.gens
	r.gens = map[genKey]engine.Generator{}
	r.mu.Unlock()
	var errs []error
	for _, g := range gens {
		errs = append(errs, closeGenerator(g))
	}
	return errors.Join(errs...)
}

func closeGenerator(g engine.Generator) error {
	if c, ok := g.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (k genKey) String() string {
	if k.name == "" {
		return fmt.Sprintf("%q", k.kind)
	}
	return fmt.Sprintf("%q name %q", k.kind, k.name)
}

// UUIDOf returns p's generator for kind and name as an
// engine.UUIDGenerator. A generator of int64 IDs under that kind and name
// is an error wrapping engine.ErrInvalidConfig; p's own errors are returned
// as they are.
func UUIDOf(ctx context.Context, p engine.Provider, kind, name string) (engine.UUIDGenerator, error) {
	g, err := p.Generator(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	u, ok := g.(engine.UUIDGenerator)
	if !ok {
		return nil, fmt.Errorf("%w: %s gives 64-bit IDs, not UUIDs (kind %q gives UUIDs)", engine.ErrInvalidConfig, genKey{kind, name}, UUIDv7)
	}
	return u, nil
}
