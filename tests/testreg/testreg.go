// Package testreg builds the registry the integration tests of idplugin,
// sqlhook and sharding draw IDs from.
package testreg

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/uuidv7"
)

// New returns a registry holding the real snowflake generator (machine 1) as
// kind "snowflake", the UUIDv7 generator as kind "uuidv7" and, standing in
// for segment chains, a counter per name from 1,000,001 as kind "chain". It
// is closed when the test ends.
func New(t testing.TB) *genreg.Registry {
	t.Helper()
	sf, err := snowflake.New(1)
	if err != nil {
		t.Fatal(err)
	}
	reg := genreg.New()
	if err := errors.Join(reg.Register("snowflake", "", sf), reg.Register("uuidv7", "", uuidv7.New(nil))); err != nil {
		t.Fatal(err)
	}
	err = reg.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) {
		var n atomic.Int64
		n.Store(1_000_000)
		return Func(func(context.Context) (int64, error) { return n.Add(1), nil }), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// Func adapts a function to engine.Generator, for tests that need a
// generator with a behaviour of their own (a counter, a failure, a panic).
type Func func(ctx context.Context) (int64, error)

// NextID calls f(ctx).
func (f Func) NextID(ctx context.Context) (int64, error) { return f(ctx) }
