package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/internal/segmenthook"
)

// Defaults, chosen for database primary keys. Those of Settings are
// documented on its fields; the others are fixed and documented on the chain (chain.go).
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

// Settings configures a chain (idforge.Settings.Chain). The zero value of every
// field means its documented default, so Settings{} is a working chain;
// fields that only concern the chain's prefetching (SafeDistance, Ahead, TTL)
// are validated but have no effect on the single-segment generator of the
// registry's "segment" kind. The name of the sequence, the logger and the
// clock belong to whoever runs the chain: a chain built without a runner has no name,
// logs to slog.Default() and reads clock.System; the registry passes its
// own (see internal/segmenthook).
type Settings struct {
	// Step is the number of IDs per segment (default 1000; at most 2^32).
	// Every store call asks for a whole number of steps.
	Step int64
	// SafeDistance is how many segments (of Step IDs each) the chain keeps
	// fetched ahead of its callers when they are fed (default 2:
	// with the default step, 2,000 to 4,000 IDs ride out a store outage;
	// at most 2^28). It counts IDs not yet handed out, the current
	// segment's remainder included.
	SafeDistance int64
	// Ahead, when positive, keeps at least this much of current traffic
	// fetched ahead: the prefetch worker measures the rate callers take IDs
	// at (a mean weighted over about the last 10 s of the chain's clock,
	// read from counters the worker keeps anyway, so NextID pays nothing
	// more) and holds at least rate × Ahead IDs, in whole segments, never
	// fewer than SafeDistance nor more than the chain's maximum distance
	// (see chain.go). A chain that holds its target rides out a store outage
	// of up to Ahead at a steady rate; when traffic falls the target falls
	// after it, halving at most once per prefetch period (1 s). The price is any prefetch's: the IDs
	// held ahead (up to twice the target) are lost on a restart, and
	// instances sharing a store interleave by as much. A chain with a Fence
	// stops serving what it holds once the store has not confirmed it for
	// the Fence, so an Ahead beyond the Fence would buy nothing and is
	// refused. Default 0: off, the distance is SafeDistance and what hunger
	// adds. At most 24 h.
	Ahead time.Duration
	// TTL discards fetched segments older than this instead of serving them
	// (default 0, none). An instance that sits on a
	// prefetched range for hours would otherwise insert IDs far below those
	// other instances are issuing now; with a TTL its IDs stay close to
	// theirs. The prefetch worker enforces it when it wakes, so an ID may be
	// served up to one prefetch period (1 s) after its segment expired. An idle
	// chain refetches its safe distance once per TTL. At most 7 days.
	TTL time.Duration
	// MaxWait bounds how long NextID waits for IDs when none are ready
	// (default 10 s: long enough to ride out a store failover, short enough
	// that a request without a deadline fails instead of hanging; at most
	// 24 h); ctx can end the wait earlier. A negative MaxWait waits as long
	// as ctx allows.
	MaxWait time.Duration
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
	// holds, and each NextID reads the clock. Default 0: off. A Fence is
	// at most the machine-ID lease's reservation, the store's ride-through
	// window (the RideThrough of engine/sqlstore and engine/redisstore:
	// when snowflake IDs stop too), and at most 24 h; a negative Fence
	// turns it on at that window. idforge.New refuses a negative Fence when
	// the lease reserves nothing (a store whose RideThrough is negative).
	Fence time.Duration
}

// owned is what the runner of a chain sets, not its user: the sequence's
// name in log records and error messages ("order"), the logger of store
// failures, recoveries and invalid ranges (default slog.Default()), and the
// clock of segment TTLs, the hunger window and the fence (default
// clock.System). Timers (the prefetch period, retries, waiting) always run
// on real time. Its tuning fields, zero outside tests, override the fixed
// prefetch period, hunger window, maximum distance and store call timeout.
type owned = segmenthook.Owned

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

// validate reports what a chain would reject in s, naming each field,
// without building anything: for the registry, which takes settings at
// start-up and builds chains later, on first use (see internal/segmenthook).
// A negative Fence passes: the registry replaces it with the lease's
// reservation, and validates the result again, before building a chain.
func (s Settings) validate() error {
	if s.Fence < 0 {
		s.Fence = 0
	}
	_, err := s.resolve(owned{})
	return err
}

// oneSettings returns the one Settings of a variadic argument.
func oneSettings(set []Settings) (Settings, error) {
	switch len(set) {
	case 0:
		return Settings{}, nil
	case 1:
		return set[0], nil
	}
	return Settings{}, fmt.Errorf("%w: segment: at most one Settings, got %d", engine.ErrInvalidConfig, len(set))
}

func newConfig(d Distributor, s Settings, o owned) (config, error) {
	c, err := s.resolve(o)
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

func (s Settings) resolve(o owned) (config, error) {
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
