// Package segmenthook gives the registry (package idforge) what
// engine/segment keeps from its users: chains with the name, logger and
// clock the registry owns, the single-segment generator behind the
// "segment" kind, which refills synchronously instead of prefetching, and a
// check of chain settings before any chain is built. Owned also carries
// test-only tuning of values fixed for users. engine/segment fills
// the functions in when it is initialized. It imports engine and
// engine/clock.
package segmenthook

import (
	"log/slog"
	"time"

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

	// Test-only tuning of values fixed for users (see segment.Chain): zero
	// means the fixed value; the registry leaves them zero. Tests shorten
	// the period and the window to run in milliseconds, or cap the
	// distance to watch it saturate. A negative duration, or a cap below
	// SafeDistance or overflowing int64 with Step, is refused.

	// PrefetchPeriod is how often the prefetch worker wakes up on its own
	// (fixed at 1 s).
	PrefetchPeriod time.Duration
	// HungerWindow is how long the prefetch distance stays widened after a
	// caller last found no ID ready (fixed at 5 s).
	HungerWindow time.Duration
	// MaxPrefetchDistance caps the prefetch distance in segments (fixed at
	// 1,000,000, lowered to what Step allows).
	MaxPrefetchDistance int64
	// FetchTimeout bounds one store call (fixed at 10 s).
	FetchTimeout time.Duration
}

// NewChain is segment.NewChain with what the runner owns: d is a
// segment.Distributor, settings a segment.Settings, and the result a
// *segment.Chain with what its runner reads and does that users do not:
// its stats and Discard. Set by engine/segment at initialization.
var NewChain func(d, settings any, o Owned) (Chain, error)

// Chain is a prefetching chain as its runner sees it.
type Chain interface {
	Single
	// Stats returns a snapshot of the chain's counters.
	Stats() Stats
	// Close stops the prefetch worker (see segment.Chain.Close).
	Close() error
}

// Stats is a snapshot of a chain's prefetching, for monitoring and tests.
type Stats struct {
	// Step is the number of IDs per segment.
	Step int64
	// PrefetchDistance is the current prefetch distance in segments: the
	// safe distance, or more while callers are hungry or Ahead asks for
	// more.
	PrefetchDistance int64
	// Ahead is the number of fetched IDs not handed out yet.
	Ahead int64
	// Issued is the number of IDs handed out.
	Issued int64
	// Fetches counts successful store calls; Failures counts failed ones
	// (store errors, timeouts and refused ranges).
	Fetches, Failures int64
	// Hungry counts NextID calls that found no ID ready and had to wait.
	Hungry int64
	// Discarded counts fetched IDs never handed out: expired by the TTL,
	// dropped by Discard or by Close.
	Discarded int64
	// LastError is the last failed fetch, nil once the store answers again.
	LastError error
}

// StatsOf returns the stats of a *segment.Chain, or of a [Chain]; false
// for anything else. Set by engine/segment at initialization.
var StatsOf func(chain any) (Stats, bool)

// Single is the single-segment generator: Discard drops the segment it
// holds (after a store reset), so the next ID comes from a new fetch.
type Single interface {
	engine.Generator
	Discard(cause error)
}

// New returns a single-segment generator drawing from d (a
// segment.Distributor) with settings (a segment.Settings; of them Step,
// MaxWait and Fence apply, the others are validated and ignored) and o (of
// its tuning, FetchTimeout applies). It does not talk to the store: the first
// NextID does. The types are the two this package cannot name, since
// engine/segment imports it. Set by engine/segment at initialization.
var New func(d, settings any, o Owned) (Single, error)

// Name returns the sequence name a *segment.Chain or a [Chain] was built
// with (see Owned), "" for anything else. Set by engine/segment at initialization.
var Name func(chain any) string

// Validate reports what segment.NewChain would reject in settings (a
// segment.Settings), naming each field. Set by engine/segment at
// initialization.
var Validate func(settings any) error
