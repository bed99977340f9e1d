package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// Defaults. CosId's code uses step 10 and safe distance 2 (its docs say 100
// and 10); ours differ where a database primary key is the use case.
const (
	// DefaultStep is the number of IDs per segment. A thousand makes one store
	// round trip per thousand IDs, so a 1 ms store costs a generator under
	// 1 µs per ID even without prefetching, while the IDs of several
	// instances stay within a few thousand of each other and a restart
	// wastes only what the chain held (at most twice the safe distance ×
	// step IDs unless it was hungry). CosId's 10 leans on
	// prefetching for every ID it serves and makes the store the bottleneck
	// of a chain that is not hungry yet.
	DefaultStep = 1000
	// DefaultSafeDistance is the number of segments the chain keeps fetched
	// ahead at least when callers are fed (CosId's code default); it tops
	// up to twice that. With the default step that is 2,000 to 4,000 IDs:
	// it rides out a store outage of at least 2,000 IDs' worth of traffic;
	// raise it for longer outages.
	DefaultSafeDistance = 2
	// DefaultMaxPrefetchDistance caps how far hunger widens the distance, in
	// segments. With the default step it is 10^9 IDs, the same number of IDs
	// as CosId's cap of 10^8 segments of 10.
	DefaultMaxPrefetchDistance = 1_000_000
	// DefaultPrefetchPeriod is how often the prefetch worker wakes up on its
	// own (it is also woken by callers that use the chain up).
	DefaultPrefetchPeriod = time.Second
	// DefaultHungerWindow is how long after the last hungry caller the
	// prefetch distance stays widened before it starts halving back.
	DefaultHungerWindow = 5 * time.Second
	// DefaultMaxWait bounds how long NextID waits for a dry chain or a
	// refill when ctx has no earlier deadline: long enough to ride out a
	// store failover, short enough that a request without a deadline fails
	// instead of hanging while the store is down.
	DefaultMaxWait = 10 * time.Second
	// DefaultFetchTimeout bounds one store call, so a store that stops
	// answering (a dropped connection with no reset) shows up as an error
	// instead of a fetch that never returns.
	DefaultFetchTimeout = 10 * time.Second
)

// Option configures a [Generator] or a [Chain]. Options that only concern the
// chain's prefetching (distances, periods, TTL) are validated but have no
// effect on a Generator.
type Option func(*config)

type config struct {
	name           string
	step           int64
	safeDistance   int64
	maxDistance    int64
	period         time.Duration
	hungerWindow   time.Duration
	ttl            time.Duration
	maxWait        time.Duration
	fetchTimeout   time.Duration
	logger         *slog.Logger
	clock          clock.Clock
	loggerSet      bool
	clockSet       bool
	maxDistanceSet bool
}

// WithName names the sequence in log records and error messages, usually the
// name given to the distributor ("order").
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithStep sets the number of IDs per segment (default [DefaultStep]). Every
// store call asks for a whole number of steps.
func WithStep(n int64) Option { return func(c *config) { c.step = n } }

// WithSafeDistance sets how many segments (of step IDs each) the chain keeps
// fetched ahead of its callers when they are fed (default
// [DefaultSafeDistance], at least 1). The distance counts IDs not yet handed
// out, the current segment's remainder included.
func WithSafeDistance(n int64) Option { return func(c *config) { c.safeDistance = n } }

// WithMaxPrefetchDistance caps the prefetch distance, in segments, that
// hunger can widen to (default [DefaultMaxPrefetchDistance], at least the
// safe distance).
func WithMaxPrefetchDistance(n int64) Option {
	return func(c *config) { c.maxDistance, c.maxDistanceSet = n, true }
}

// WithPrefetchPeriod sets how often the prefetch worker wakes up on its own
// (default [DefaultPrefetchPeriod]). It also bounds how late a TTL is enforced
// and how often a widened distance halves.
func WithPrefetchPeriod(d time.Duration) Option { return func(c *config) { c.period = d } }

// WithHungerWindow sets how long the prefetch distance stays widened after a
// caller last found no ID ready (default [DefaultHungerWindow]).
func WithHungerWindow(d time.Duration) Option { return func(c *config) { c.hungerWindow = d } }

// WithTTL discards fetched segments older than d instead of serving them
// (CosId's segment TTL; default 0, no TTL). An instance that sits on a
// prefetched range for hours would otherwise insert IDs far below those
// other instances are issuing now; with a TTL its IDs stay close to theirs.
// The prefetch worker enforces it when it wakes, so an ID may be served up
// to one prefetch period after its segment expired. An idle chain refetches
// its safe distance once per TTL.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithMaxWait bounds how long NextID waits for IDs when none are ready
// (default [DefaultMaxWait]); ctx can end the wait earlier. Zero waits as
// long as ctx allows.
func WithMaxWait(d time.Duration) Option { return func(c *config) { c.maxWait = d } }

// WithFetchTimeout bounds one store call (default [DefaultFetchTimeout]).
func WithFetchTimeout(d time.Duration) Option { return func(c *config) { c.fetchTimeout = d } }

// WithLogger sets where store failures, recoveries and invalid ranges are
// logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger, c.loggerSet = l, true } }

// WithClock sets the clock behind segment TTLs and the hunger window
// (default clock.System); tests pass a clock.Fake. Timers (the prefetch
// period, retries, waiting) always run on real time.
func WithClock(c clock.Clock) Option { return func(cfg *config) { cfg.clock, cfg.clockSet = c, true } }

// CheckOptions reports what NewChain or New would reject in opts, without
// building anything: for code that takes segment options at start-up and
// builds chains later, on first use.
func CheckOptions(opts ...Option) error {
	_, err := newConfig(DistributorFunc(func(context.Context, int64) (int64, error) { return 0, nil }), opts)
	return err
}

func newConfig(d Distributor, opts []Option) (config, error) {
	c := config{
		step:         DefaultStep,
		safeDistance: DefaultSafeDistance,
		maxDistance:  DefaultMaxPrefetchDistance,
		period:       DefaultPrefetchPeriod,
		hungerWindow: DefaultHungerWindow,
		maxWait:      DefaultMaxWait,
		fetchTimeout: DefaultFetchTimeout,
		logger:       slog.Default(),
		clock:        clock.System,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	// The default cap gives way to a large step or safe distance; an
	// explicit cap that does not fit is an error.
	if !c.maxDistanceSet {
		if c.step > 0 {
			c.maxDistance = min(c.maxDistance, math.MaxInt64/c.step/2)
		}
		c.maxDistance = max(c.maxDistance, c.safeDistance)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: segment: %s", engine.ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if d == nil {
		bad("nil Distributor")
	}
	if c.step <= 0 {
		bad("WithStep(%d): step must be positive", c.step)
	}
	if c.safeDistance < 1 {
		bad("WithSafeDistance(%d): need at least 1 segment", c.safeDistance)
	}
	if c.maxDistance < c.safeDistance {
		bad("WithMaxPrefetchDistance(%d): below the safe distance %d", c.maxDistance, c.safeDistance)
	}
	if c.step > 0 && c.maxDistance > math.MaxInt64/c.step/2 {
		bad("WithMaxPrefetchDistance(%d) × step %d overflows int64", c.maxDistance, c.step)
	}
	if c.period <= 0 {
		bad("WithPrefetchPeriod(%v): must be positive", c.period)
	}
	if c.hungerWindow <= 0 {
		bad("WithHungerWindow(%v): must be positive", c.hungerWindow)
	}
	if c.ttl < 0 {
		bad("WithTTL(%v): must not be negative (0 disables it)", c.ttl)
	}
	if c.maxWait < 0 {
		bad("WithMaxWait(%v): must not be negative (0 waits as long as ctx allows)", c.maxWait)
	}
	if c.fetchTimeout <= 0 {
		bad("WithFetchTimeout(%v): must be positive", c.fetchTimeout)
	}
	if c.loggerSet && c.logger == nil {
		bad("WithLogger(nil)")
	}
	if c.clockSet && c.clock == nil {
		bad("WithClock(nil)")
	}
	return c, errors.Join(errs...)
}
