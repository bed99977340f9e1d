package chain

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/segment"
)

// Defaults, chosen for database primary keys. Those of segment.Settings are
// documented on its fields; the others are fixed and documented on [Chain].
const (
	// defaultStep is the number of IDs per segment. A thousand makes one store
	// round trip per thousand IDs, so a 1 ms store costs a generator under
	// 1 µs per ID even without prefetching, while the IDs of several
	// instances stay within a few thousand of each other and a restart
	// wastes only what the chain held (at most twice the safe distance ×
	// step IDs unless it was hungry or Ahead asked for more). A step of 10
	// would lean on
	// prefetching for every ID it serves and make the store the bottleneck
	// of a chain that is not hungry yet.
	defaultStep = 1000
	// defaultSafeDistance is the number of segments the chain keeps fetched
	// ahead at least when callers are fed; it tops
	// up to twice that. With the default step that is 2,000 to 4,000 IDs:
	// it rides out a store outage of at least 2,000 IDs' worth of traffic;
	// raise it for longer outages.
	defaultSafeDistance = 2
	// rateWindow is the time constant of the issue rate Ahead measures:
	// long enough that a second's lull does not empty the target, short
	// enough that it follows a change in traffic within a minute or so.
	rateWindow = 10 * time.Second
	// maxPrefetchDistance caps how far hunger widens the distance, in
	// segments. With the default step it is 10^9 IDs: CosId's cap is
	// 10^8 segments of 10 IDs, the same order of IDs.
	maxPrefetchDistance = 1_000_000
	// prefetchPeriod is how often the prefetch worker wakes up on its own
	// (it is also woken by callers that use the chain up), as in CosId.
	prefetchPeriod = time.Second
	// hungerWindow is how long after the last hungry caller the prefetch
	// distance stays widened before it starts halving back, as in CosId.
	hungerWindow = 5 * time.Second
	// defaultMaxWait bounds how long NextID waits for a dry chain or a
	// refill when ctx has no earlier deadline: long enough to ride out a
	// store failover, short enough that a request without a deadline fails
	// instead of hanging while the store is down.
	defaultMaxWait = 10 * time.Second
	// fetchTimeout bounds one store call, so a store that stops
	// answering (a dropped connection with no reset) shows up as an error
	// instead of a fetch that never returns.
	fetchTimeout = 10 * time.Second
)

// Bounds on Settings, documented on its fields. Past them a value is a
// mistake, and every product and sum the chain forms with them (step ×
// distance × 2, a clock reading plus a window) stays far inside int64.
const (
	maxStep         = 1 << 32            // IDs per segment: about 4 × 10^9
	maxSafeDistance = 1 << 28            // segments: 2 × maxStep × maxSafeDistance fits
	maxWindow       = 24 * time.Hour     // Ahead, Fence, MaxWait
	maxTTL          = 7 * 24 * time.Hour // TTL
)

// Owned is what the runner of a chain sets, not its user: the registry
// (package idforge) names each chain after its sequence and gives it its
// own logger and clock.
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

	// Test-only tuning of values fixed for users (see [Chain]): zero
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

// config is Settings with every default filled in, in the names the chain uses.
type config struct {
	name         string
	step         int64
	safeDistance int64
	ahead        time.Duration // 0: no rate-sized target
	maxDistance  int64
	period       time.Duration
	hungerWindow time.Duration
	ttl          time.Duration
	maxWait      time.Duration // 0: as long as ctx allows
	fetchTimeout time.Duration
	fence        time.Duration
	logger       *slog.Logger
	clock        clock.Clock
}

// Validate reports what a chain would reject in s, naming each field,
// without building anything: for the registry, which takes settings at
// start-up and builds chains later, on first use. A negative Fence passes:
// the registry replaces it with the lease's reservation, and validates the
// result again, before building a chain.
func Validate(s segment.Settings) error {
	if s.Fence < 0 {
		s.Fence = 0
	}
	_, err := resolve(s, Owned{})
	return err
}

func newConfig(d segment.Distributor, s segment.Settings, o Owned) (config, error) {
	c, err := resolve(s, o)
	if d == nil {
		err = errors.Join(fmt.Errorf("%w: segment: nil Distributor", engine.ErrInvalidConfig), err)
	}
	return c, err
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func resolve(s segment.Settings, o Owned) (config, error) {
	c := config{
		name:         o.Name,
		step:         orDefault(s.Step, defaultStep),
		safeDistance: orDefault(s.SafeDistance, defaultSafeDistance),
		ahead:        s.Ahead,
		maxDistance:  o.MaxPrefetchDistance,
		period:       orDefault(o.PrefetchPeriod, prefetchPeriod),
		hungerWindow: orDefault(o.HungerWindow, hungerWindow),
		ttl:          s.TTL,
		maxWait:      orDefault(s.MaxWait, defaultMaxWait),
		fetchTimeout: orDefault(o.FetchTimeout, fetchTimeout),
		fence:        s.Fence,
		logger:       o.Logger,
		clock:        o.Clock,
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.clock == nil {
		c.clock = clock.System
	}
	if c.maxWait < 0 {
		c.maxWait = 0
	}
	// The fixed cap gives way to a large step or safe distance; a test's
	// cap that does not fit is an error.
	if c.maxDistance == 0 {
		c.maxDistance = maxPrefetchDistance
		if c.step > 0 {
			c.maxDistance = min(c.maxDistance, math.MaxInt64/c.step/2)
		}
		c.maxDistance = max(c.maxDistance, c.safeDistance)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: segment: %s", engine.ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if c.step < 0 || c.step > maxStep {
		bad("Step %d: must be in [1, %d]", c.step, int64(maxStep))
	}
	if c.safeDistance < 0 || c.safeDistance > maxSafeDistance {
		bad("SafeDistance %d: must be in [1, %d] segments", c.safeDistance, maxSafeDistance)
	}
	// Within their bounds Step and SafeDistance never overflow; a test's
	// cap on the distance may.
	if len(errs) == 0 && c.maxDistance < c.safeDistance {
		bad("MaxPrefetchDistance %d: below SafeDistance %d", c.maxDistance, c.safeDistance)
	}
	if len(errs) == 0 && c.step > 0 && c.maxDistance > math.MaxInt64/c.step/2 {
		bad("MaxPrefetchDistance %d × Step %d overflows int64", c.maxDistance, c.step)
	}
	if c.period < 0 {
		bad("PrefetchPeriod %v: must be positive", c.period)
	}
	if c.hungerWindow < 0 {
		bad("HungerWindow %v: must be positive", c.hungerWindow)
	}
	if c.ttl < 0 || c.ttl > maxTTL {
		bad("TTL %v: must be in [0, %v] (0 disables it)", c.ttl, maxTTL)
	}
	if c.fence < 0 {
		bad("Fence %v: negative (fence at the store's ride-through window) is resolved by idforge.New; a chain takes a Fence in [0, %v]", c.fence, maxWindow)
	}
	if c.fence > maxWindow {
		bad("Fence %v: must be in [0, %v] (0 disables it)", c.fence, maxWindow)
	}
	if c.ahead < 0 || c.ahead > maxWindow {
		bad("Ahead %v: must be in [0, %v] (0 disables it)", c.ahead, maxWindow)
	}
	if c.maxWait > maxWindow {
		bad("MaxWait %v: must be at most %v (negative waits as long as ctx allows)", c.maxWait, maxWindow)
	}
	if c.fence > 0 && c.ahead > c.fence {
		bad("Ahead %v: beyond Fence %v, after which the chain stops serving the IDs it holds", c.ahead, c.fence)
	}
	if c.fetchTimeout < 0 {
		bad("FetchTimeout %v: must be positive", c.fetchTimeout)
	}
	return c, errors.Join(errs...)
}
