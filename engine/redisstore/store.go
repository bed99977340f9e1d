package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/internal/storeepoch"
)

// defaultPrefix starts every key unless [Settings.Prefix] says otherwise.
const defaultPrefix = "{idforge}:"

// Settings configures a [Store]. The zero value is the documented default
// of every field; [Open] validates them once.
type Settings struct {
	// Prefix starts every key, so several applications or environments can
	// share one Redis (default "{idforge}:"). All keys of a store must
	// share one Redis Cluster hash tag: a prefix with a hash tag ("{shop}:")
	// is used as it is; to one without, the store appends "{idforge}:"
	// ("shop:" gives keys "shop:{idforge}:…"). A prefix must not contain an
	// empty tag "{}".
	Prefix string
	// Start is where segment names seen for the first time start: the first
	// range is (Start, Start+step]. It has no effect on names that already
	// exist. Default 0; negative is an error.
	Start int64
	// Floor, if set, reads from the data how far a sequence has gone: the
	// largest ID its tables hold, for example
	// SELECT COALESCE(MAX(id), 0) FROM orders for the sequence "order".
	// Before a store value's first fetch of a name, and its first after
	// every store reset it sees, the store raises the counter to Floor's
	// answer (creating it if missing; a counter never moves down), and
	// counts the answer as handed out: a counter later found below it is a
	// store that went back. So a counter the store lost comes back above
	// every ID already written, even when no process that used it is alive
	// to report its floor, and a table moved from AUTO_INCREMENT keeps its
	// keys. Floor runs once per name, process start and reset (once per
	// fetch racing the first), never per ID. It runs on the fetching
	// goroutine (a chain's refill) with the fetch's context, so it should
	// honour ctx: a chain's Close waits for it. It sees committed rows
	// only: stop other writers of the table (the old AUTO_INCREMENT code)
	// before switching. A failing or panicking Floor fails that fetch
	// (wrapping engine.ErrStoreUnavailable) and is asked again at the next.
	//
	// Floor (and a Floor given to [Store.Segment]) is also what lets a
	// sequence start on a store that was not initialised as brand-new: see
	// [Settings.Init].
	Floor engine.Floor
	// Clock tells machine distribution what "now" is and times the reset
	// grace (default clock.System). Tests pass a clocktest.Fake.
	Clock clock.Clock
	// RideThrough is the store's ride-through window: how long a process
	// cut off from the store goes on issuing snowflake IDs (and chain IDs
	// under segment.Settings.Fence). Every heartbeat of a machine-ID lease
	// stores its clock plus RideThrough, and the generator refuses
	// timestamps past what it last stored, so whoever takes the machine ID
	// next (a reclaim, a restart after kill -9 with the clock stepped back)
	// starts above everything it issued. Default 1 s; it must be longer
	// than the lease's Heartbeat and at most its SafeGuard minus SkewMargin
	// (the lease refuses it otherwise: past that the machine ID may be
	// reclaimed, so a window of a minute needs a SafeGuard of 75 s or more;
	// the default is 5 min). Its price is paid where that is safe: a
	// first start on a store not declared brand-new ([Settings.Init]; on
	// Redis a wipe and a new store look alike), and every start after a
	// wipe, waits RideThrough plus 1 s (the reset grace), so that every
	// process cut off from the wiped store has stopped; a stable instance
	// restarted after an unclean stop waits up to RideThrough for its own
	// last timestamp. Raise it (say to a minute) to ride out store outages
	// that long. The store records it in a key beside the epoch; [Open]
	// refuses a different value with engine.ErrInvalidConfig, since every
	// process sharing a store must use the same window: stop them all and
	// run `idforge store ride-through D` to change it. Negative: no
	// reservation, a lease then issues until its safe-guard runs out and
	// needs a ResetGrace above that (tests and benchmarks). At most 24 h:
	// [Open] refuses more with engine.ErrInvalidConfig.
	RideThrough time.Duration
	// ResetGrace is how long after an epoch's creation the store hands
	// nothing out (default RideThrough plus 1 s, 2 s by default; with a
	// negative RideThrough 2 s): long enough for every process of the
	// forgotten epoch to stop, through a failing heartbeat or, cut off from
	// the store, through its ride-through window running out. The second
	// beyond the window is the clock skew between hosts a reset tolerates:
	// a wipe erases the stored timestamps that otherwise absorb skew.
	// The registry's lease refuses to issue without the store for as
	// long (the store's Terms carry the grace). Set it only to raise the skew allowed, or negative to wait
	// for nothing: only for tests, or a store no other process uses. At
	// most 48 h: [Open] refuses more with engine.ErrInvalidConfig.
	ResetGrace time.Duration
	// Init declares the store brand-new when [Open] finds it without an
	// epoch, as `idforge store init` does: it never handed out an ID, so it
	// hands out at once (no reset grace) and a sequence missing from it
	// starts at Start. Without Init a store found without an epoch may have
	// been wiped after handing out IDs (on Redis a wipe and a new store look
	// alike), so a missing sequence starts only above a Floor and is refused
	// with engine.ErrNoFloor without one. For setup jobs, tests and demos; a
	// service that sets it takes a Redis wiped under it for a new one.
	Init bool
	// AllowVolatile opens a Redis without persistence (no AOF, no RDB
	// snapshots), which Open otherwise refuses: a restart forgets
	// everything. It stays safe only because of the epoch and the reset
	// grace, and IDs already written elsewhere (rows of processes that are
	// gone) may repeat unless [Settings.Floor] reads them.
	AllowVolatile bool
	// Logger receives the persistence warnings and the line saying the
	// store waits out its reset grace (default slog.Default()).
	Logger *slog.Logger
}

var (
	//go:embed scripts/epoch.lua
	epochCheck string
	//go:embed scripts/create_epoch.lua
	createEpochSrc string
	//go:embed scripts/segment.lua
	segmentSrc string
	//go:embed scripts/restored.lua
	restoredSrc string

	createEpochScript = redis.NewScript(createEpochSrc)
	segmentScript     = redis.NewScript(epochCheck + segmentSrc)
	restoredScript    = redis.NewScript(restoredSrc)
)

// Store keeps segments and machine-ID assignments in one Redis (or Redis
// Cluster, Ring, failover client): it implements machine.Distributor and
// hands out a segment.Distributor per name. It is safe for concurrent use.
type Store struct {
	client redis.Cmdable
	cfg    Settings
	base   string // every key starts with it; it carries the hash tag
	name   string // "redisstore <addr> <base>", the context of every error
	epoch  *storeepoch.State
	// rewriting: opened by OpenAdmin, which does not refuse a recorded
	// ride-through window that differs.
	rewriting bool
}

// Open validates the settings, checks that the Redis persists what it is
// told (see [Settings.AllowVolatile]; appendfsync other than always is
// logged as a warning with the window it leaves) and may not evict its keys
// (an allkeys-* maxmemory-policy with a maxmemory is refused), checks the
// ride-through window the store records against [Settings.RideThrough]
// (recording it when there is none), and reads the store's
// epoch. A store without one (a first start, or a Redis that forgot
// everything: they cannot be told apart) gets a new epoch, and Open then
// waits [Settings.ResetGrace] so that processes still working under a
// forgotten epoch have stopped before this one hands anything out. The
// caller keeps the client and closes it.
func Open(ctx context.Context, client redis.Cmdable, settings ...Settings) (*Store, error) {
	return open(ctx, client, false, settings)
}

// open is [Open], or with rewriting [OpenAdmin]'s, which does not refuse a
// recorded ride-through window that differs.
func open(ctx context.Context, client redis.Cmdable, rewriting bool, settings []Settings) (*Store, error) {
	var cfg Settings
	switch len(settings) {
	case 0:
	case 1:
		cfg = settings[0]
	default:
		return nil, fmt.Errorf("%w: redisstore: %d Settings given; Open takes at most one", engine.ErrInvalidConfig, len(settings))
	}
	if client == nil {
		return nil, fmt.Errorf("%w: redisstore: nil Redis client", engine.ErrInvalidConfig)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = defaultPrefix
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	var err error
	if cfg.RideThrough, cfg.ResetGrace, err = storeepoch.Windows("redisstore", cfg.RideThrough, cfg.ResetGrace); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Start < 0:
		return nil, fmt.Errorf("%w: redisstore: negative segment start %d", engine.ErrInvalidConfig, cfg.Start)
	case strings.Contains(cfg.Prefix, "{}"):
		// An empty hash tag makes Redis Cluster hash whole keys, scattering
		// the store's keys over slots where one script cannot reach them all.
		return nil, fmt.Errorf("%w: redisstore: prefix %q contains an empty hash tag {}", engine.ErrInvalidConfig, cfg.Prefix)
	}
	s := &Store{client: client, cfg: cfg, base: keyBase(cfg.Prefix), rewriting: rewriting}
	s.name = "redisstore " + clientAddr(client) + " " + s.base
	s.epoch = storeepoch.NewState(cfg.Clock, cfg.ResetGrace)
	s.epoch.LogWaits(cfg.Logger, s.name)
	if err := s.checkPersistence(ctx); err != nil {
		return nil, err
	}
	token, err := s.createEpoch(ctx, cfg.Init)
	if err != nil {
		return nil, err
	}
	if err := s.openRideThrough(ctx); err != nil {
		return nil, err
	}
	s.epoch.Set(token)
	if _, err := s.epoch.Wait(ctx); err != nil {
		return nil, s.unavailable("waiting out the reset grace of a new epoch", err)
	}
	return s, nil
}

// keyBase is the start of every key: the prefix, with "{idforge}:" appended
// when it has no hash tag of its own.
func keyBase(prefix string) string {
	if i := strings.IndexByte(prefix, '{'); i >= 0 {
		if j := strings.IndexByte(prefix[i+1:], '}'); j > 0 {
			return prefix
		}
	}
	return prefix + "{idforge}:"
}

func clientAddr(c redis.Cmdable) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		return "ring"
	}
	return "redis"
}

// rideKey is the key holding the store's ride-through window (ms), beside
// the epoch under the same hash tag: a wipe forgets both.
func (s *Store) rideKey() string { return s.base + storeepoch.RecordName }

// openRideThrough records [Settings.RideThrough] when the store records no
// window, and refuses a different recorded one (unless [OpenAdmin] opened
// the store).
func (s *Store) openRideThrough(ctx context.Context) error {
	if err := s.client.SetNX(ctx, s.rideKey(), storeepoch.FormatRecord(s.cfg.RideThrough), 0).Err(); err != nil {
		return s.unavailable("recording the ride-through window", err)
	}
	rec, err := s.client.Get(ctx, s.rideKey()).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil // wiped meanwhile: the epoch check sees that
	case err != nil:
		return s.unavailable("reading the ride-through window", err)
	case s.rewriting:
		return nil
	}
	return storeepoch.CheckRecord(s.name, rec, s.cfg.RideThrough)
}

// epochKey is the key holding the store's epoch token.
func (s *Store) epochKey() string { return s.base + "epoch" }

// segmentKey is the key holding the last max ID of the segment name.
func (s *Store) segmentKey(name string) string { return s.base + "segment:" + name }

// segmentKeys are the keys of the segment script for the segment name: the
// epoch, its counter, the restore count and the trusted hash (see
// scripts/restored.lua).
func (s *Store) segmentKeys(name string) []string {
	return []string{s.epochKey(), s.segmentKey(name), s.base + "restores", s.base + "trusted"}
}

// createEpoch makes the store's epoch exist and returns it; a new one is
// brand-new if so asked. A new epoch marks every counter the store still
// holds untrusted, in the same script: a store found without an epoch may
// have lost it alone (the key deleted, a snapshot restored without it).
func (s *Store) createEpoch(ctx context.Context, brandNew bool) (string, error) {
	fresh := storeepoch.NewToken(s.cfg.Clock.Now())
	if brandNew {
		fresh = storeepoch.NewBrandNewToken(s.cfg.Clock.Now())
	}
	keys := s.segmentKeys("")
	token, err := createEpochScript.Eval(ctx, s.client, []string{keys[0], keys[2], keys[3]}, fresh).Text()
	if err != nil {
		return "", s.unavailable("creating the epoch", err)
	}
	return token, nil
}

// ready waits until the current epoch may hand things out, re-seeds the
// segment floors after an adoption, and returns the epoch token.
func (s *Store) ready(ctx context.Context) (string, error) {
	token, err := s.epoch.Ready(ctx, s.raise)
	if err != nil {
		return "", s.unavailable("", err)
	}
	return token, nil
}

// raise lifts the segment name to at least floor under the epoch token
// (nothing when the epoch is no longer token).
func (s *Store) raise(ctx context.Context, token, name string, floor int64) error {
	res, err := segmentScript.Eval(ctx, s.client, s.segmentKeys(name),
		token, 0, s.cfg.Start, floor, "", "0", "0", name).Slice()
	if err != nil {
		return err
	}
	// A 'reset' reply means the epoch moved again: the caller's own
	// operation will see it, adopt the newest epoch and re-seed under it.
	if r := reply(res); r.kind() != "ok" && r.kind() != "reset" {
		return fmt.Errorf("%w %v", errBadReply, res)
	}
	return nil
}

// BrandNew reports whether the store's epoch was declared brand-new
// ([Settings.Init], `idforge store init`): no sequence of it was handed out
// before the epoch, so a missing one may start at Start.
func (s admin) BrandNew() bool { return storeepoch.BrandNew(s.epoch.Token()) }

// Close is a no-op: the operator's commands hold nothing of their own, and
// the caller keeps the client.
func (admin) Close() error { return nil }

// EpochCreated returns when the store's epoch was created.
func (s admin) EpochCreated() time.Time {
	t, _ := storeepoch.Created(s.epoch.Token())
	return t
}

// declareRestored runs scripts/restored.lua: a new epoch and every counter
// untrusted, only while the epoch is seen unless seen is "". It returns
// the epoch now stored.
func (s *Store) declareRestored(ctx context.Context, seen string) (string, error) {
	keys := s.segmentKeys("")
	return restoredScript.Eval(ctx, s.client, []string{keys[0], keys[2], keys[3]}, storeepoch.NewToken(s.cfg.Clock.Now()), seen).Text()
}

// wentBack handles a machine ID this process holds found missing from the
// store under its epoch (IDs are never deleted): the store went back, so
// any counter may be older than what was handed out. It declares the store
// restored unless another process replaced the epoch first, adopts the
// epoch now stored and returns the reset error.
func (s *Store) wentBack(ctx context.Context, token, what string) error {
	current, err := s.declareRestored(ctx, token)
	if err != nil {
		return s.unavailable(what+": declaring restored a store that went back", err)
	}
	return s.reset(ctx, token, current, what)
}

// reset handles a script's 'reset' reply: the store value adopts the epoch
// now stored (creating one when there is none) and the caller gets an error
// wrapping engine.ErrStoreReset.
func (s *Store) reset(ctx context.Context, seen, current, what string) error {
	return s.epoch.Reset(ctx, s.name, what, seen, current, func() (string, error) { return s.createEpoch(ctx, false) }, s.raise)
}

// unavailable wraps a failed command as engine.ErrStoreUnavailable, keeping
// err (a context error, a network error, a Redis reply) reachable by
// errors.Is.
func (s *Store) unavailable(what string, err error) error {
	if what == "" {
		return fmt.Errorf("%s: %w: %w", s.name, engine.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", s.name, what, engine.ErrStoreUnavailable, err)
}

// scriptReply is a script's reply: a kind ('ok', 'reset', 'lost', 'full')
// and values.
type scriptReply []any

func reply(res []any) scriptReply { return scriptReply(res) }

func (r scriptReply) kind() string {
	if len(r) == 0 {
		return ""
	}
	k, _ := r[0].(string)
	return k
}

func (r scriptReply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	v, _ := r[i].(string)
	return v
}

func (r scriptReply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	v, _ := r[i].(int64)
	return v
}

var errBadReply = errors.New("unexpected script reply")
