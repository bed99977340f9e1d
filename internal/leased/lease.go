package leased

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/outage"
)

// Lease defaults, documented on machine.Settings. The heartbeat is short
// because every heartbeat also reserves time ahead and is how a lease
// notices a store that was reset.
const (
	DefaultMachineBits = 10
	DefaultSafeGuard   = 5 * time.Minute
	DefaultHeartbeat   = 250 * time.Millisecond
	// MinHeartbeat is the shortest heartbeat interval: each heartbeat is
	// a store round trip, and one every few milliseconds would burn a core
	// and, slower than its own interval, lose the lease to its own queue.
	MinHeartbeat = 100 * time.Millisecond
)

// revertTimeout bounds the Revert in Close: a shutdown must not hang on a
// dead store, and an ID that is not given back expires after the safe-guard.
const revertTimeout = 5 * time.Second

// LeaseSettings configures [Acquire]: the knobs users set (Lease,
// documented on machine.Settings) and what the composition running the
// generator owns. The zero value of every field means its default.
type LeaseSettings struct {
	// Lease holds the knobs users set: Heartbeat, SafeGuard, SkewMargin.
	Lease machine.Settings
	// MachineBits is the width of the machine ID (default 10: IDs 0 to
	// 1023). It must match the generator's layout.
	MachineBits int
	// Reservation is how far ahead each heartbeat reserves time: it stores
	// the newest timestamp used plus Reservation, and Check refuses
	// timestamps past the last reservation stored. Zero takes the store's
	// ride-through window (machine.Terms.RideThrough, the RideThrough
	// setting of engine/sqlstore and engine/redisstore), or 4 × Heartbeat
	// from a distributor without one; negative: none. Users set the window on the
	// store; tests set this to override it.
	Reservation time.Duration
	// Clock drives heartbeats and lease expiry (default clock.System). The
	// lease runs on clock.Steady of it, and so must the generator it
	// fences: Check compares the generator's timestamps with times read
	// from this one, and the timestamps heartbeated must cover them. Pass
	// the generator the same clock.Steady value ([New] does). A
	// clocktest.Fake needs ManualSleep, because the heartbeat goroutine sleeps
	// on the clock.
	Clock clock.Clock
	// Logger receives heartbeat failures, recovery and loss (default
	// slog.Default()). A store outage logs one warning when it starts, a
	// summary at most every 10 s while it lasts and one line with its
	// length when it ends, however often the heartbeat retries.
	Logger *slog.Logger
	// TimestampSource returns the newest Unix millisecond timestamp the
	// generator has used, such as a snowflake generator's LastTimestamp.
	// Heartbeats and Close store the later of it and now, so the next holder
	// of the ID waits out IDs issued ahead of the clock. It is called from
	// the heartbeat goroutine and must be safe for concurrent use.
	TimestampSource func() int64
}

// config is LeaseSettings with every default filled in.
type config struct {
	machineBits int
	safeGuard   time.Duration
	heartbeat   time.Duration
	margin      time.Duration
	reserve     time.Duration
	reserveSet  bool // Reservation was given, not taken from the store
	fromStore   bool // the reservation is the store's ride-through window
	clock       clock.Clock
	logger      *slog.Logger
	source      func() int64
}

func (s LeaseSettings) resolve() (config, error) {
	c := config{
		machineBits: s.MachineBits,
		safeGuard:   s.Lease.SafeGuard,
		heartbeat:   s.Lease.Heartbeat,
		margin:      s.Lease.SkewMargin,
		reserve:     s.Reservation,
		reserveSet:  s.Reservation != 0,
		clock:       s.Clock,
		logger:      s.Logger,
		source:      s.TimestampSource,
	}
	if c.machineBits == 0 {
		c.machineBits = DefaultMachineBits
	}
	if c.safeGuard == 0 {
		c.safeGuard = DefaultSafeGuard
	}
	if c.heartbeat == 0 {
		c.heartbeat = DefaultHeartbeat
	}
	switch {
	case c.margin == 0:
		c.margin = c.safeGuard / 5
	case c.margin < 0:
		c.margin = 0
	}
	switch {
	case c.reserve == 0:
		c.reserve = 4 * c.heartbeat
	case c.reserve < 0:
		c.reserve = 0
	}
	c.clock = clock.Steady(c.clock)
	if c.logger == nil {
		c.logger = slog.Default()
	}
	switch {
	case c.safeGuard < 0 || c.safeGuard > machine.MaxSafeGuard:
		return c, fmt.Errorf("%w: machine: SafeGuard %v outside (0, %v]", engine.ErrInvalidConfig, c.safeGuard, machine.MaxSafeGuard)
	case c.heartbeat < MinHeartbeat:
		return c, fmt.Errorf("%w: machine: Heartbeat %v is below the floor %v: every heartbeat is a store round trip", engine.ErrInvalidConfig, c.heartbeat, MinHeartbeat)
	case c.margin >= c.safeGuard:
		return c, fmt.Errorf("%w: machine: SkewMargin %v must be below SafeGuard %v", engine.ErrInvalidConfig, c.margin, c.safeGuard)
	case c.heartbeat >= c.safeGuard-c.margin:
		return c, fmt.Errorf("%w: machine: Heartbeat %v must be shorter than SafeGuard %v minus SkewMargin %v",
			engine.ErrInvalidConfig, c.heartbeat, c.safeGuard, c.margin)
	}
	return c, c.checkReserve()
}

// checkReserve refuses a reservation the lease cannot keep: one a
// heartbeat does not renew in time, and one past the safe-guard less the
// skew margin, after which the machine ID may already be reclaimed, so
// the lease would stop earlier than the window promises. Refusing says so
// at start-up rather than cutting the window short in the middle of an
// outage.
func (c config) checkReserve() error {
	name := "Reservation"
	if c.fromStore {
		name = "the store's RideThrough"
	}
	switch window := c.safeGuard - c.margin; {
	case c.reserve > 0 && c.heartbeat >= c.reserve:
		return fmt.Errorf("%w: machine: %s %v must be longer than the lease's Heartbeat %v",
			engine.ErrInvalidConfig, name, c.reserve, c.heartbeat)
	case c.reserve > window:
		return fmt.Errorf("%w: machine: %s %v must not be longer than the lease's SafeGuard %v minus SkewMargin %v (%v): "+
			"past that the machine ID may be reclaimed, so the lease could not keep issuing; raise SafeGuard above 5/4 of it "+
			"(SkewMargin is a fifth of SafeGuard by default) or shorten the window",
			engine.ErrInvalidConfig, name, c.reserve, c.safeGuard, c.margin, window)
	}
	return nil
}

// adoptWindow takes d's ride-through window as the reservation unless
// LeaseSettings.Reservation set one. A remote store learns its window at
// Distribute, so Acquire calls this again afterwards.
func (c *config) adoptWindow(d machine.Distributor) error {
	if c.reserveSet {
		return nil
	}
	switch w := d.Terms().RideThrough; {
	case w > 0:
		c.reserve, c.fromStore = w, true
	case w < 0:
		c.reserve, c.fromStore = 0, true
	}
	return c.checkReserve()
}

// alone is how long a lease goes on confirming timestamps after its last
// successful heartbeat started, and which settings make it so (for errors):
// its reservation (checkReserve keeps it within the safe-guard window), or
// that window alone without a reservation.
func (c config) alone() (time.Duration, string) {
	window := c.safeGuard - c.margin
	switch {
	case c.reserve > 0 && c.fromStore:
		return c.reserve, fmt.Sprintf("the store's RideThrough %v", c.reserve)
	case c.reserve > 0 && c.reserveSet:
		return c.reserve, fmt.Sprintf("Lease.Reservation %v", c.reserve)
	case c.reserve > 0:
		return c.reserve, fmt.Sprintf("the default Lease.Reservation, 4 × Heartbeat %v", c.heartbeat)
	}
	return window, fmt.Sprintf("no reservation: SafeGuard %v minus SkewMargin %v", c.safeGuard, c.margin)
}

// checkGrace refuses a lease that could go on issuing without d for as long
// as d's reset grace (machine.Terms.ResetGrace): a process cut off from the
// store while it is reset would then share its machine ID with a newcomer.
func (c config) checkGrace(d machine.Distributor) error {
	alone, from := c.alone()
	if grace := d.Terms().ResetGrace; grace > 0 && alone >= grace {
		return fmt.Errorf("%w: machine: the lease would go on issuing for up to %v without its store (%s), not less than the store's ResetGrace %v, "+
			"so a process cut off from the store while it is reset could share its machine ID with a newcomer: "+
			"leave the store's ResetGrace to its default (RideThrough plus 1 s), "+
			"or set the store's RideThrough between Heartbeat %v and %v, less the clock skew between hosts, "+
			"or raise the store's ResetGrace above %v on every process (a new or reset store then waits that long before handing anything out)",
			engine.ErrInvalidConfig, alone, from, grace, c.heartbeat, grace, alone)
	}
	return nil
}

// checkClock compares c's clock with d's server clock (machine.Distributor's
// ServerTime).
// The server read its time somewhere between the two local readings around
// the call, so their midpoint is off by at most half the round trip, which
// is allowed for.
func (c config) checkClock(ctx context.Context, d machine.Distributor, inst machine.Instance) error {
	if c.margin <= 0 {
		return nil
	}
	// The host's wall clock, not the time base: a base run ahead of a
	// stepped-back wall clock stamps the store later than the host's clock
	// would, which delays reclaims and never hastens one.
	wall := c.clock.Now
	if w, ok := c.clock.(interface{ Wall() time.Time }); ok {
		wall = w.Wall
	}
	before := wall()
	server, err := d.ServerTime(ctx)
	after := wall()
	if err != nil {
		return fmt.Errorf("machine: reading the store's clock for %s: %w", instanceName(inst.Namespace, inst.ID, inst.Stable), err)
	}
	if server.IsZero() {
		return nil
	}
	halfRTT := max(after.Sub(before), 0) / 2
	local := before.Add(halfRTT)
	skew := local.Sub(server)
	way := "ahead of"
	if skew < 0 {
		way = "behind"
	}
	off := max(skew, -skew) - halfRTT
	switch {
	case off > c.margin:
		return fmt.Errorf("%w: machine: %s: the local clock (%s) is %v %s the store's server clock (%s), beyond the lease's skew margin %v "+
			"even allowing %v for half the round trip: expiry decisions would compare clocks that disagree by more than the lease allows for; "+
			"synchronise this host's clock (NTP, chrony), or raise Lease.SkewMargin (by default a fifth of SafeGuard)",
			engine.ErrClockSkew, instanceName(inst.Namespace, inst.ID, inst.Stable), fmtTime(local), max(skew, -skew), way, fmtTime(server), c.margin, halfRTT)
	case off > c.margin/2:
		c.logger.Warn("idforge: the local clock disagrees with the store's server clock by over half the lease's skew margin; synchronise this host's clock",
			"namespace", inst.Namespace, "instance", inst.ID, "local", fmtTime(local), "server", fmtTime(server),
			"skew", skew, "round_trip", 2*halfRTT, "skew_margin", c.margin)
	}
	return nil
}

// Lease is a machine ID held by this process: the ID a snowflake generator
// runs on, kept alive by a heartbeat goroutine and given back by Close.
//
// Check fences the generator. A heartbeat that started at s on the lease's
// clock and succeeded left a stored last timestamp of at least s, so an
// instance can reclaim the ID only once its clock reads s + safeGuard, and
// waiting out that timestamp it issues only later ones; Check refuses
// timestamps from s + safeGuard - margin on, so the two never meet. Check
// judges the timestamp of the ID being made, not when it is handed out: a
// process paused past the safe-guard (GC, VM freeze, SIGSTOP) refuses as
// soon as it wakes, before its heartbeat goroutine runs, and an ID made just
// before the pause is still older than anything the new holder issues. The
// margin absorbs disagreement between the clock a store judges expiry by and
// the clocks generators issue by (a lagging cached clock, a store on server
// time).
//
// Transient heartbeat errors (store down) are logged and retried every
// quarter interval; the lease stays valid until the window above runs out,
// then Check fails until a heartbeat succeeds again, saying that the store
// cannot be reached (so another instance may have taken the ID meanwhile). A heartbeat that finds
// the ID taken over ends the lease for good: Check, Heartbeat and Err report
// engine.ErrMachineIDLost and Lost is closed; acquire a new lease (and build
// a new generator) to go on.
type Lease struct {
	dist  machine.Distributor
	inst  machine.Instance
	cfg   config
	state machine.State
	log   *slog.Logger

	// validUntil is the Unix millisecond time from which Check fails,
	// math.MinInt64 once the lease ended. It is Check's only read on the
	// fast path; writers hold mu.
	validUntil atomic.Int64
	end        atomic.Pointer[ending]
	lost       chan struct{}
	// away is the heartbeats' failure while the store does not answer
	// them, nil once one succeeds: Check's refusals say so.
	away atomic.Pointer[storeAway]
	// outage logs the heartbeat goroutine's failures; owned by it.
	outage outage.Log

	// mu serialises Guard and Revert calls, so the store receives this
	// lease's timestamps in order.
	mu        sync.Mutex
	highWater int64 // the newest timestamp distributed or sent; under mu

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

type ending struct{ err error }

// storeAway is a run of heartbeats the store did not answer.
type storeAway struct {
	since time.Time // when the first of them started
	err   error     // the last one's error
}

// unreachableError is Check's refusal while the store cannot be reached.
// The lease lapsed, so it matches engine.ErrMachineIDLost as any lapse
// does, and the heartbeat's error (engine.ErrStoreUnavailable, a
// timeout); its text says what is known: the store is away, so the
// machine ID may have been taken, not that it was.
type unreachableError struct {
	msg   string
	store error
}

func (e *unreachableError) Error() string   { return e.msg }
func (e *unreachableError) Unwrap() []error { return []error{engine.ErrMachineIDLost, e.store} }

// Acquire distributes a machine ID for inst from d and starts heartbeating
// it. ctx bounds the distribution only; the heartbeat runs until Close.
// Acquire does not wait out State().LastTimestamp: the generator does, at
// start-up. Invalid settings fail with engine.ErrInvalidConfig; a clock too
// far from the store server's (machine.Distributor's ServerTime) with
// engine.ErrClockSkew;
// the distributor's errors are returned wrapped (engine.ErrMachineIDOverflow
// when every ID is taken, engine.ErrInstanceInUse when a stable inst runs in
// another live process or another process on this host holds the lock of
// a fixed machine ID, see [LocalState]).
func Acquire(ctx context.Context, d machine.Distributor, inst machine.Instance, set LeaseSettings) (*Lease, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: machine: Acquire needs a distributor", engine.ErrInvalidConfig)
	}
	cfg, err := set.resolve()
	if err != nil {
		return nil, err
	}
	if err := cfg.adoptWindow(d); err != nil {
		return nil, err
	}
	if err := cfg.checkGrace(d); err != nil {
		return nil, err
	}
	if err := machine.ValidateDistribute(inst, cfg.machineBits, cfg.safeGuard); err != nil {
		return nil, err
	}
	if err := cfg.checkClock(ctx, d, inst); err != nil {
		return nil, err
	}
	start := cfg.clock.Now().UnixMilli()
	st, err := d.Distribute(ctx, inst, cfg.machineBits, cfg.safeGuard)
	var held *heldError
	switch {
	case errors.As(err, &held):
		return nil, err // it says all: which machine ID, whose lock, what to do
	case errors.Is(err, engine.ErrInstanceInUse):
		return nil, fmt.Errorf("machine: %s already runs in another live process (a pod name reused during a rollout, a copied configuration?): "+
			"stop that process, or give this one an instance ID of its own: %w", instanceName(inst.Namespace, inst.ID, inst.Stable), err)
	case err != nil:
		return nil, fmt.Errorf("machine: distributing a machine ID to %s: %w", instanceName(inst.Namespace, inst.ID, inst.Stable), err)
	}
	if err := fits(st.MachineID, cfg.machineBits, "the distributor"); err != nil {
		return nil, err
	}
	// Again: a remote store (proxystore) learns its window and grace from
	// Distribute.
	if err := cfg.adoptWindow(d); err != nil {
		return nil, errors.Join(err, d.Revert(ctx, inst, st))
	}
	if err := cfg.checkGrace(d); err != nil {
		return nil, errors.Join(err, d.Revert(ctx, inst, st))
	}
	hb, stop := context.WithCancel(context.Background())
	l := &Lease{
		dist:      d,
		inst:      inst,
		cfg:       cfg,
		state:     st,
		log:       cfg.logger.With("namespace", inst.Namespace, "instance", inst.ID, "machine_id", st.MachineID, "holder", st.Holder.String()),
		lost:      make(chan struct{}),
		highWater: st.LastTimestamp,
		stop:      stop,
		done:      make(chan struct{}),
	}
	l.outage = outage.Log{Logger: l.log, Still: "idforge: machine ID heartbeats still failing",
		End: "idforge: machine ID heartbeat recovered"}
	l.validUntil.Store(start + l.window())
	if err := hold(l, start); err != nil {
		stop()
		return nil, err
	}
	if cfg.reserve > 0 {
		// Nothing is reserved yet: refuse until the first reservation is stored.
		l.validUntil.Store(start)
		if err := l.Heartbeat(ctx); err != nil {
			stop()
			release(l)
			return nil, fmt.Errorf("machine: reserving time for machine ID %d of %s: %w", st.MachineID, instanceName(inst.Namespace, inst.ID, inst.Stable), err)
		}
	}
	l.log.Info("idforge: machine ID acquired", "last_timestamp", st.LastTimestamp)
	go l.run(hb)
	return l, nil
}

// window is how long a heartbeat confirms the lease, in milliseconds.
func (l *Lease) window() int64 { return (l.cfg.safeGuard - l.cfg.margin).Milliseconds() }

// Reservation returns the time each heartbeat reserves ahead (see
// [LeaseSettings].Reservation: the store's ride-through window); 0
// without one. A generator starting on this lease may
// have to wait up to this long for State().LastTimestamp.
func (l *Lease) Reservation() time.Duration { return l.cfg.reserve }

// WaitOut waits until the lease's clock is past State().LastTimestamp, the
// newest time the machine ID's previous holder may have used, so that a
// generator started afterwards issues only later timestamps. With a
// reservation a restart normally waits up to Reservation(), and rides out a
// clock stepped back by up to another Reservation() while it was down; a
// longer wait than that plus defaultMaxBackwards fails at once with an
// error wrapping engine.ErrClockBackwards.
func (l *Lease) WaitOut(ctx context.Context) error {
	if err := waitUntil(ctx, l.cfg.clock, time.UnixMilli(l.state.LastTimestamp+1), 2*l.cfg.reserve+defaultMaxBackwards); err != nil {
		return fmt.Errorf("machine: machine ID %d of %s was used up to %s: %w",
			l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), fmtMilli(l.state.LastTimestamp), err)
	}
	return nil
}

// MachineID returns the leased machine ID.
func (l *Lease) MachineID() int64 { return l.state.MachineID }

// State returns the state as distributed: LastTimestamp is what a generator
// must wait out before issuing its first ID, Holder the holding's secret.
func (l *Lease) State() machine.State { return l.state }

// Check returns nil while IDs with the Unix millisecond timestamp unixMilli
// may be issued under the leased machine ID. Otherwise it returns an error
// wrapping engine.ErrMachineIDLost (the ID was taken over, or no heartbeat
// confirmed it recently enough) or engine.ErrClosed (after Close). While
// heartbeats fail because the store cannot be reached, the refusal says
// so and wraps the heartbeat's error too (engine.ErrStoreUnavailable). Pass
// timestamps from the clock given to [LeaseSettings].Clock. It is the snowflake
// generator's Fence: one atomic load, no lock, no allocation while valid.
func (l *Lease) Check(unixMilli int64) error {
	if unixMilli < l.validUntil.Load() {
		return nil
	}
	return l.refuse(unixMilli)
}

func (l *Lease) refuse(unixMilli int64) error {
	if e := l.end.Load(); e != nil {
		return e.err
	}
	if a := l.away.Load(); a != nil {
		return l.unreachable(a, unixMilli)
	}
	if l.cfg.reserve > 0 {
		return fmt.Errorf("%w: machine: machine ID %d of %s is reserved in the store only up to %s, before the timestamp %s: "+
			"refusing until a heartbeat reserves more", engine.ErrMachineIDLost, l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable),
			fmtMilli(l.validUntil.Load()-1), fmtMilli(unixMilli))
	}
	confirmed := l.validUntil.Load() - l.window()
	return fmt.Errorf("%w: machine: machine ID %d of %s was last confirmed at %s, %v before the timestamp %s; "+
		"past the safe-guard %v less the skew margin %v another instance may have reclaimed it: refusing until a heartbeat succeeds",
		engine.ErrMachineIDLost, l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), fmtMilli(confirmed),
		time.Duration(unixMilli-confirmed)*time.Millisecond, fmtMilli(unixMilli), l.cfg.safeGuard, l.cfg.margin)
}

// unreachable is the refusal of unixMilli while the store does not answer
// the heartbeats.
func (l *Lease) unreachable(a *storeAway, unixMilli int64) error {
	var held string
	if l.cfg.reserve > 0 {
		held = fmt.Sprintf("it is reserved only up to %s, before the timestamp %s", fmtMilli(l.validUntil.Load()-1), fmtMilli(unixMilli))
	} else {
		held = fmt.Sprintf("it was last confirmed at %s, past the safe-guard %v less the skew margin %v before the timestamp %s",
			fmtMilli(l.validUntil.Load()-l.window()), l.cfg.safeGuard, l.cfg.margin, fmtMilli(unixMilli))
	}
	return &unreachableError{store: a.err, msg: fmt.Sprintf("machine: the store has not answered the heartbeats of machine ID %d of %s since %s, "+
		"so another instance may have taken the ID: %s; refusing until a heartbeat reaches the store: %v",
		l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), fmtTime(a.since), held, a.err)}
}

func fmtMilli(ms int64) string { return fmtTime(time.UnixMilli(ms)) }

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// Lost returns a channel closed when the lease ends: its machine ID was taken
// over by another instance, or Close was called. Err then tells which.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns nil while the lease lasts, then an error wrapping
// engine.ErrMachineIDLost (taken over) or engine.ErrClosed. A lease that
// merely lapsed for want of heartbeats has not ended: Err stays nil.
func (l *Lease) Err() error {
	if e := l.end.Load(); e != nil {
		return e.err
	}
	return nil
}

// Heartbeat guards the machine ID now, storing the newest of the clock (plus
// the reservation, see [LeaseSettings].Reservation), the timestamp source and every
// timestamp sent before. Success confirms the
// lease for another safe-guard window, also after it lapsed. If the ID was
// taken over, the lease ends and Heartbeat returns an error wrapping
// engine.ErrMachineIDLost; other errors leave the lease as it was.
func (l *Lease) Heartbeat(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.end.Load(); e != nil {
		return e.err
	}
	began := l.cfg.clock.Now()
	start := began.UnixMilli()
	sent := l.newest(start + l.cfg.reserve.Milliseconds())
	err := l.dist.Guard(ctx, l.inst, machine.State{MachineID: l.state.MachineID, LastTimestamp: sent, Holder: l.state.Holder})
	switch {
	case err == nil:
		l.away.Store(nil)
		until := start + l.window()
		if l.cfg.reserve > 0 {
			until = min(until, sent+1)
		}
		if until > l.validUntil.Load() {
			l.validUntil.Store(until)
		}
		return nil
	case errors.Is(err, engine.ErrMachineIDLost):
		l.endWith(fmt.Errorf("machine: %s lost machine ID %d (holder %s), taken over by another instance or another process with this instance ID; stop issuing and acquire a new one: %w",
			instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), l.state.MachineID, l.state.Holder, err))
		l.log.Error("idforge: machine ID taken over by another holder; IDs under it are refused", "err", err)
		return l.Err()
	case errors.Is(err, engine.ErrStoreReset):
		// The store forgot the assignment: another instance may be handed
		// this ID any moment, so the lease is as good as lost.
		l.endWith(fmt.Errorf("%w: machine: %s stops using machine ID %d: %w", engine.ErrMachineIDLost, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), l.state.MachineID, err))
		l.log.Error("idforge: the store was reset; IDs under this machine ID are refused", "err", err)
		return l.Err()
	default:
		err = fmt.Errorf("machine: heartbeat of machine ID %d for %s: %w", l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), err)
		// A caller that gave up says nothing of the store; a timeout does.
		if !errors.Is(err, context.Canceled) {
			since := began
			if a := l.away.Load(); a != nil {
				since = a.since
			}
			l.away.Store(&storeAway{since: since, err: err})
		}
		return err
	}
}

// newest returns the timestamp to store now and remembers it. Callers hold mu.
func (l *Lease) newest(now int64) int64 {
	ts := max(l.highWater, now)
	if l.cfg.source != nil {
		ts = max(ts, l.cfg.source())
	}
	l.highWater = ts
	return ts
}

// endWith ends the lease with err. Callers hold mu and found it not ended.
func (l *Lease) endWith(err error) {
	l.end.Store(&ending{err: err})
	l.validUntil.Store(math.MinInt64)
	close(l.lost)
	release(l)
}

func (l *Lease) run(ctx context.Context) {
	defer close(l.done)
	wait := l.cfg.heartbeat
	for {
		if l.cfg.clock.Sleep(ctx, wait) != nil {
			return
		}
		hctx, cancel := context.WithTimeout(ctx, l.cfg.heartbeat)
		err := l.Heartbeat(hctx)
		cancel()
		switch {
		case ctx.Err() != nil, l.end.Load() != nil:
			return // closed, or lost (Heartbeat logged it)
		case err == nil:
			l.outage.Recovered(l.cfg.clock.Now())
			wait = l.cfg.heartbeat
		default:
			// Retry sooner: each miss brings the lapse of the lease closer.
			wait = l.cfg.heartbeat / 4
			l.outage.Failed(l.cfg.clock.Now(), slog.LevelWarn,
				"idforge: machine ID heartbeat failed; IDs are refused from valid_until on unless one succeeds",
				err, "valid_until", fmtMilli(l.validUntil.Load()))
		}
	}
}

// Close stops the heartbeat, makes Check refuse, and reverts the machine ID
// with the newest timestamp used, so the next holder waits it out (a stable
// instance keeps its ID: that is the distributor's job). A lease whose ID was
// taken over reverts nothing. Close waits for the heartbeat goroutine to exit
// and bounds the Revert by a few seconds; it returns the Revert's error and
// is safe to call more than once.
func (l *Lease) Close() error {
	l.closeOnce.Do(func() {
		l.stop()
		<-l.done
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.end.Load() != nil {
			return
		}
		l.endWith(fmt.Errorf("%w: machine: lease of machine ID %d for %s", engine.ErrClosed, l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable)))
		// Read after endWith: no ID passes Check any more, so the
		// timestamp below covers every ID issued under the lease.
		// With a timestamp source the lease knows what was issued, and a
		// clean close need not keep the reservation: the next holder waits
		// only for what was used, and for what the previous holder used
		// (a lease closed before its generator started, say because the
		// clock was too far back, must not lower that).
		now := l.cfg.clock.Now().UnixMilli()
		var last int64
		if l.cfg.source != nil {
			last = max(now, l.state.LastTimestamp, l.cfg.source())
		} else {
			last = l.newest(now)
		}
		st := machine.State{MachineID: l.state.MachineID, LastTimestamp: last, Holder: l.state.Holder}
		ctx, cancel := context.WithTimeout(context.Background(), revertTimeout)
		defer cancel()
		if err := l.dist.Revert(ctx, l.inst, st); err != nil {
			l.closeErr = fmt.Errorf("machine: reverting machine ID %d for %s: %w", l.state.MachineID, instanceName(l.inst.Namespace, l.inst.ID, l.inst.Stable), err)
		}
	})
	return l.closeErr
}
