package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// Defaults, chosen for database primary keys.
const (
	// DefaultStep is the number of IDs per segment. A thousand makes one store
	// round trip per thousand IDs, so a 1 ms store costs a generator under
	// 1 µs per ID even without prefetching, while the IDs of several
	// instances stay within a few thousand of each other and a restart
	// wastes only what the chain held (at most twice the safe distance ×
	// step IDs unless it was hungry). A step of 10 would lean on
	// prefetching for every ID it serves and make the store the bottleneck
	// of a chain that is not hungry yet.
	DefaultStep = 1000
	// DefaultSafeDistance is the number of segments the chain keeps fetched
	// ahead at least when callers are fed; it tops
	// up to twice that. With the default step that is 2,000 to 4,000 IDs:
	// it rides out a store outage of at least 2,000 IDs' worth of traffic;
	// raise it for longer outages.
	DefaultSafeDistance = 2
	// DefaultMaxPrefetchDistance caps how far hunger widens the distance, in
	// segments. With the default step it is 10^9 IDs.
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

// Settings configures a [Generator] or a [Chain]. The zero value of every
// field means its documented default, so Settings{} is a working chain;
// fields that only concern the chain's prefetching (distances, periods, TTL)
// are validated but have no effect on a Generator.
//
// Settings is itself an [Option]: NewChain(d, Settings{Step: 100}) and
// NewChain(d, WithStep(100)) build the same chain. Settings replaces every
// field; the With* options each change one, in order.
type Settings struct {
	// Name names the sequence in log records and error messages, usually the
	// name given to the distributor ("order").
	Name string
	// Step is the number of IDs per segment (default [DefaultStep]). Every
	// store call asks for a whole number of steps.
	Step int64
	// SafeDistance is how many segments (of Step IDs each) the chain keeps
	// fetched ahead of its callers when they are fed (default
	// [DefaultSafeDistance]). It counts IDs not yet handed out, the current
	// segment's remainder included.
	SafeDistance int64
	// MaxPrefetchDistance caps the prefetch distance, in segments, that
	// hunger can widen to (default [DefaultMaxPrefetchDistance], lowered to
	// what Step allows without overflow; at least SafeDistance).
	MaxPrefetchDistance int64
	// PrefetchPeriod is how often the prefetch worker wakes up on its own
	// (default [DefaultPrefetchPeriod]). It also bounds how late a TTL is
	// enforced and how often a widened distance halves.
	PrefetchPeriod time.Duration
	// HungerWindow is how long the prefetch distance stays widened after a
	// caller last found no ID ready (default [DefaultHungerWindow]).
	HungerWindow time.Duration
	// TTL discards fetched segments older than this instead of serving them
	// (default 0, none). An instance that sits on a
	// prefetched range for hours would otherwise insert IDs far below those
	// other instances are issuing now; with a TTL its IDs stay close to
	// theirs. The prefetch worker enforces it when it wakes, so an ID may be
	// served up to one prefetch period after its segment expired. An idle
	// chain refetches its safe distance once per TTL.
	TTL time.Duration
	// MaxWait bounds how long NextID waits for IDs when none are ready
	// (default [DefaultMaxWait]); ctx can end the wait earlier. A negative
	// MaxWait waits as long as ctx allows.
	MaxWait time.Duration
	// FetchTimeout bounds one store call (default [DefaultFetchTimeout]).
	FetchTimeout time.Duration
	// Fence, when positive, stops serving the IDs already held once the
	// store has not confirmed them for that long: NextID then waits, as on
	// a dry chain, for the store to answer, and fails with an error
	// wrapping engine.ErrStoreUnavailable when ctx or MaxWait ends first. A process cut off from a store that is wiped meanwhile would
	// otherwise go on serving ranges a newcomer may be handed again; with a
	// Fence shorter than the store's reset grace it stops before the
	// newcomer starts. The store confirms with each fetch, and on
	// engine/sqlstore and engine/redisstore with every operation of the
	// same store value (a machine-ID lease's heartbeats); an idle chain
	// fetches a step of its own when half the Fence passed unconfirmed.
	// The price: the chain no longer rides out store outages on what it
	// holds, and each NextID reads the clock. Default 0: off.
	Fence time.Duration
	// Logger receives store failures, recoveries and invalid ranges
	// (default slog.Default()).
	Logger *slog.Logger
	// Clock drives segment TTLs and the hunger window (default
	// clock.System); tests pass a clock.Fake. Timers (the prefetch period,
	// retries, waiting) always run on real time.
	Clock clock.Clock
}

// Option configures a [Generator] or a [Chain]: a [Settings] value, or one
// of the With* options, each of which sets one field of Settings.
type Option interface{ apply(*Settings) }

func (s Settings) apply(dst *Settings) { *dst = s }

type optionFunc func(*Settings)

func (f optionFunc) apply(s *Settings) { f(s) }

// WithName sets [Settings].Name.
func WithName(name string) Option { return optionFunc(func(s *Settings) { s.Name = name }) }

// WithStep sets [Settings].Step.
func WithStep(n int64) Option { return optionFunc(func(s *Settings) { s.Step = n }) }

// WithSafeDistance sets [Settings].SafeDistance.
func WithSafeDistance(n int64) Option { return optionFunc(func(s *Settings) { s.SafeDistance = n }) }

// WithMaxPrefetchDistance sets [Settings].MaxPrefetchDistance.
func WithMaxPrefetchDistance(n int64) Option {
	return optionFunc(func(s *Settings) { s.MaxPrefetchDistance = n })
}

// WithPrefetchPeriod sets [Settings].PrefetchPeriod.
func WithPrefetchPeriod(d time.Duration) Option {
	return optionFunc(func(s *Settings) { s.PrefetchPeriod = d })
}

// WithHungerWindow sets [Settings].HungerWindow.
func WithHungerWindow(d time.Duration) Option {
	return optionFunc(func(s *Settings) { s.HungerWindow = d })
}

// WithTTL sets [Settings].TTL.
func WithTTL(d time.Duration) Option { return optionFunc(func(s *Settings) { s.TTL = d }) }

// WithMaxWait sets [Settings].MaxWait.
func WithMaxWait(d time.Duration) Option { return optionFunc(func(s *Settings) { s.MaxWait = d }) }

// WithFetchTimeout sets [Settings].FetchTimeout.
func WithFetchTimeout(d time.Duration) Option {
	return optionFunc(func(s *Settings) { s.FetchTimeout = d })
}

// WithLogger sets [Settings].Logger.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(s *Settings) { s.Logger = l }) }

// WithClock sets [Settings].Clock.
func WithClock(c clock.Clock) Option { return optionFunc(func(s *Settings) { s.Clock = c }) }

// config is Settings with every default filled in, in the names the chain uses.
type config struct {
	name         string
	step         int64
	safeDistance int64
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

// Validate reports what NewChain or New would reject in s, naming each
// field, without building anything: for code that takes settings at
// start-up and builds chains later, on first use.
func (s Settings) Validate() error {
	_, err := s.resolve()
	return err
}

func newConfig(d Distributor, opts []Option) (config, error) {
	var s Settings
	for _, o := range opts {
		if o != nil {
			o.apply(&s)
		}
	}
	c, err := s.resolve()
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

func (s Settings) resolve() (config, error) {
	c := config{
		name:         s.Name,
		step:         orDefault(s.Step, DefaultStep),
		safeDistance: orDefault(s.SafeDistance, DefaultSafeDistance),
		maxDistance:  s.MaxPrefetchDistance,
		period:       orDefault(s.PrefetchPeriod, DefaultPrefetchPeriod),
		hungerWindow: orDefault(s.HungerWindow, DefaultHungerWindow),
		ttl:          s.TTL,
		maxWait:      orDefault(s.MaxWait, DefaultMaxWait),
		fetchTimeout: orDefault(s.FetchTimeout, DefaultFetchTimeout),
		fence:        s.Fence,
		logger:       s.Logger,
		clock:        s.Clock,
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
	// The default cap gives way to a large step or safe distance; an
	// explicit cap that does not fit is an error.
	if c.maxDistance == 0 {
		c.maxDistance = DefaultMaxPrefetchDistance
		if c.step > 0 {
			c.maxDistance = min(c.maxDistance, math.MaxInt64/c.step/2)
		}
		c.maxDistance = max(c.maxDistance, c.safeDistance)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: segment: %s", engine.ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if c.step < 0 {
		bad("Step %d: must be positive", c.step)
	}
	if c.safeDistance < 0 {
		bad("SafeDistance %d: need at least 1 segment", c.safeDistance)
	}
	if c.maxDistance < c.safeDistance {
		bad("MaxPrefetchDistance %d: below SafeDistance %d", c.maxDistance, c.safeDistance)
	}
	if c.step > 0 && c.maxDistance > math.MaxInt64/c.step/2 {
		bad("MaxPrefetchDistance %d × Step %d overflows int64", c.maxDistance, c.step)
	}
	if c.period < 0 {
		bad("PrefetchPeriod %v: must be positive", c.period)
	}
	if c.hungerWindow < 0 {
		bad("HungerWindow %v: must be positive", c.hungerWindow)
	}
	if c.ttl < 0 {
		bad("TTL %v: must not be negative (0 disables it)", c.ttl)
	}
	if c.fence < 0 {
		bad("Fence %v: must not be negative (0 disables it)", c.fence)
	}
	if c.fetchTimeout < 0 {
		bad("FetchTimeout %v: must be positive", c.fetchTimeout)
	}
	return c, errors.Join(errs...)
}
