// Package segmenthook gives the registry (package idforge) what
// engine/segment keeps from its users: chains with the name, logger and
// clock the registry owns, the single-segment generator behind the
// "segment" kind, which refills synchronously instead of prefetching, and a
// check of chain settings before any chain is built. engine/segment fills
// the functions in when it is initialized. It imports engine and
// engine/clock.
package segmenthook

import (
	"log/slog"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// Owned is what the runner of a chain sets, not its user.
type Owned struct {
	// Name names the sequence in log records and error messages, usually
	// the name given to the distributor ("order").
	Name string
	// Logger receives store failures, recoveries and invalid ranges
	// (default slog.Default()).
	Logger *slog.Logger
	// Clock drives segment TTLs, the hunger window and the fence (default
	// clock.System). Timers (the prefetch period, retries, waiting) always
	// run on real time.
	Clock clock.Clock
}

// NewChain is segment.NewChain with what the runner owns: d is a
// segment.Distributor, settings a segment.Settings, and the result a
// *segment.Chain. Set by engine/segment at initialization.
var NewChain func(d, settings any, o Owned) (Single, error)

// Single is the single-segment generator: Discard drops the segment it
// holds (after a store reset), so the next ID comes from a new fetch.
type Single interface {
	engine.Generator
	Discard(cause error)
}

// New returns a single-segment generator drawing from d (a
// segment.Distributor) with settings (a segment.Settings; of them Step,
// MaxWait, FetchTimeout and Fence apply, the others are validated and
// ignored) and o. It does not talk to the store: the first
// NextID does. The types are the two this package cannot name, since
// engine/segment imports it. Set by engine/segment at initialization.
var New func(d, settings any, o Owned) (Single, error)

// Name returns the sequence name a *segment.Chain was built with (see
// Owned), "" for anything else. Set by engine/segment at initialization.
var Name func(chain any) string

// Validate reports what segment.NewChain would reject in settings (a
// segment.Settings), naming each field. Set by engine/segment at
// initialization.
var Validate func(settings any) error
