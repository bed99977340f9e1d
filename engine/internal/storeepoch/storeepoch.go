// Package storeepoch is the part of the store-reset protocol that
// engine/sqlstore and engine/redisstore share: epoch tokens, the grace a
// store value waits after adopting a new epoch, the per-name floors it
// re-seeds, the epoch each machine-ID holding was handed out under, and the
// refusals of a sequence without a Floor (missing, or its counter
// untrusted after a restore).
//
// A store keeps an epoch token, written when its state is first created.
// Every operation that hands something out (or heartbeats it) sends the token
// the store value knows and the store checks it atomically with the
// operation. When the token is missing or different the store forgot what it
// handed out: the operation fails with engine.ErrStoreReset, the store value
// adopts the current token (creating one if there is none) and hands nothing
// out until the token's creation time plus the grace, so every live process
// of the old epoch has noticed (its lease heartbeat fails) and stopped. A
// token records its creation time: "<unix ms>.<16 hex digits>".
package storeepoch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// DefaultRideThrough is a store's ride-through window when its settings
// leave it zero: how long a process cut off from the store goes on issuing
// snowflake IDs (the lease's reservation). One second keeps today's costs: a
// first start on a store not declared brand-new waits it plus SkewMargin,
// and a stable instance restarted after kill -9 waits up to it.
const DefaultRideThrough = time.Second

// SkewMargin is what a reset grace adds to the ride-through window: the
// clock skew between hosts a wipe tolerates, since a wipe erases the stored
// timestamps that otherwise absorb skew.
const SkewMargin = time.Second

// DefaultGrace is the wait after a new epoch with the default window: more
// than the lease's reservation, so every process of the old epoch has
// stopped, through a failing heartbeat or its reservation running out,
// before anything of the new one is handed out.
const DefaultGrace = DefaultRideThrough + SkewMargin

// GraceFor is the reset grace of a store whose ride-through window is w:
// w plus SkewMargin; with no window (w < 0, a lease without reservation)
// DefaultGrace.
func GraceFor(w time.Duration) time.Duration {
	if w < 0 {
		return DefaultGrace
	}
	return w + SkewMargin
}

// MaxRideThrough bounds a store's ride-through window. A newcomer on a
// wiped store waits the window out, so a day is already more than any
// deployment would pay; the bound keeps every sum of a window, a grace and
// a clock reading far from overflowing (a window of the largest Duration
// once made the grace wrap negative, so a wiped store waited for nothing).
const MaxRideThrough = 24 * time.Hour

// MaxResetGrace bounds a store's reset grace: room for the largest window
// plus a skew allowance as large.
const MaxResetGrace = 2 * MaxRideThrough

// ResolveRideThrough fills in the default window (0) and normalises "none"
// (negative) to -1 ms, the value a store records. Check w with
// [CheckRideThrough] first.
func ResolveRideThrough(w time.Duration) time.Duration {
	switch {
	case w == 0:
		return DefaultRideThrough
	case w < 0:
		return -time.Millisecond
	}
	return w.Truncate(time.Millisecond)
}

// CheckRideThrough refuses a window above MaxRideThrough, or one that
// rounds to 0 ms (which would read as the default), with an error
// wrapping engine.ErrInvalidConfig that names field (e.g.
// "sqlstore.Settings.RideThrough").
func CheckRideThrough(field string, w time.Duration) error {
	if w > 0 && w < time.Millisecond {
		return fmt.Errorf("%w: %s %v is under the store's 1 ms resolution (negative: no window)", engine.ErrInvalidConfig, field, w)
	}
	if w > MaxRideThrough {
		return fmt.Errorf("%w: %s %v is above the bound %v: newcomers on a wiped store wait the window out",
			engine.ErrInvalidConfig, field, w, MaxRideThrough)
	}
	return nil
}

// Windows checks and resolves a store's RideThrough and ResetGrace settings
// (pkg is the store's package, naming the fields in errors): the window as
// [ResolveRideThrough] does, the grace as the window plus SkewMargin when
// zero and -1 (no wait) when negative. A window above MaxRideThrough or a
// grace above MaxResetGrace is refused with an error wrapping
// engine.ErrInvalidConfig that names the field.
func Windows(pkg string, w, grace time.Duration) (time.Duration, time.Duration, error) {
	if err := CheckRideThrough(pkg+".Settings.RideThrough", w); err != nil {
		return 0, 0, err
	}
	w = ResolveRideThrough(w)
	switch {
	case grace > MaxResetGrace:
		return 0, 0, fmt.Errorf("%w: %s.Settings.ResetGrace %v is above the bound %v", engine.ErrInvalidConfig, pkg, grace, MaxResetGrace)
	case grace == 0:
		grace = GraceFor(w)
	case grace < 0:
		grace = -1 // any negative is none; one value keeps sums with it in range
	}
	return w, grace, nil
}

// RecordName is the name of the meta entry (SQL) or key suffix (Redis)
// holding the store's ride-through window, in milliseconds.
const RecordName = "ride_through"

// FormatRecord renders w as the record holds it.
func FormatRecord(w time.Duration) string { return strconv.FormatInt(w.Milliseconds(), 10) }

// CheckRecord compares the recorded window rec (as FormatRecord wrote it)
// with ours: every process sharing a store must use the same window, since
// the wait after a wipe and a reclaim's start are the store's and cover
// only processes that stop within it.
func CheckRecord(store, rec string, ours time.Duration) error {
	got, ok := ParseRecord(rec)
	if !ok {
		return fmt.Errorf("%w: %s: the recorded ride-through window %q is not a number of milliseconds up to %v; rewrite it with `idforge store ride-through D`",
			engine.ErrInvalidConfig, store, rec, MaxRideThrough)
	}
	if got != ours {
		return fmt.Errorf("%w: %s: Settings.RideThrough %v differs from the window %v the store records: every process sharing a store must use the same one; "+
			"use %v, or stop every process of the store and run `idforge store ride-through %v` to change it",
			engine.ErrInvalidConfig, store, fmtWindow(ours), fmtWindow(got), fmtWindow(got), fmtWindow(ours))
	}
	return nil
}

// ParseRecord reads a record FormatRecord wrote; ok is false for "", a
// malformed one, or one outside what a store records: -1 (none) to
// MaxRideThrough in milliseconds.
func ParseRecord(rec string) (w time.Duration, ok bool) {
	ms, err := strconv.ParseInt(rec, 10, 64)
	if err != nil || ms < -1 || ms > MaxRideThrough.Milliseconds() {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// CheckQuiet refuses to rewrite a store's window while a machine ID may be
// issuing under the old one, old: newest is the newest last timestamp
// (Unix ms) of a held machine ID, 0 for none. A holder stores its clock plus
// the window at every heartbeat, so one that heartbeated within the old
// window plus its grace stored a timestamp after now less the grace.
func CheckQuiet(store string, newest, now int64, old time.Duration) error {
	if old == 0 {
		old = DefaultRideThrough
	}
	if newest == 0 || newest <= now-GraceFor(old).Milliseconds() {
		return nil
	}
	return fmt.Errorf("%s: a machine ID holder stored the timestamp %s, within the reset grace %v of now under the window %v: "+
		"a process may still be issuing under the old window; stop every process of the store first, or rewrite with -force: %w",
		store, time.UnixMilli(newest).UTC().Format("2006-01-02T15:04:05.000Z"), GraceFor(old), fmtWindow(old), engine.ErrInstanceInUse)
}

func fmtWindow(w time.Duration) string {
	if w < 0 {
		return "none (negative)"
	}
	return w.String()
}

// NewToken returns a fresh token created at now, for a store that may have
// handed things out before (a store found without an epoch: a first start
// and a wipe look alike).
func NewToken(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(now.UnixMilli(), 10) + "." + hex.EncodeToString(b[:])
}

// brandNewSuffix marks the token of a store an operator declared brand-new.
const brandNewSuffix = ".new"

// NewBrandNewToken returns a fresh token created at now for a store that an
// operator declared brand-new (`idforge store init`, a store's Init
// setting): nothing was ever handed out from it, so there is no grace to
// wait and a missing sequence may start at the store's Start.
func NewBrandNewToken(now time.Time) string { return NewToken(now) + brandNewSuffix }

// BrandNew reports whether token was made by [NewBrandNewToken].
func BrandNew(token string) bool { return strings.HasSuffix(token, brandNewSuffix) }

// Created returns the creation time recorded in token; ok is false for a
// token not made by NewToken.
func Created(token string) (t time.Time, ok bool) {
	ms, _, found := strings.Cut(token, ".")
	if !found {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// State is what one store value knows of its store's epoch. It is safe for
// concurrent use.
type State struct {
	clock clock.Clock
	grace time.Duration // <= 0: no wait

	adopt sync.Mutex // serializes adoptions

	mu      sync.Mutex
	token   string
	readyAt time.Time
	floors  map[string]int64
	reseed  bool // floors not re-seeded since the last adoption

	confirmed atomic.Int64 // Unix ns: when the newest epoch-checked operation that succeeded was sent

	log        *slog.Logger // the wait line; nil: none
	store      string       // the store's name, for the wait line
	waitLogged string       // the token whose wait was logged

	holdings sync.Map // machine-ID holder secret → the epoch it was handed out under
}

// LogWaits makes Wait log one line per epoch it waits for, naming store.
func (s *State) LogWaits(log *slog.Logger, store string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.store = log, store
}

// Held records that the machine-ID holding with secret holder was handed
// out under the epoch token: a heartbeat that finds the ID gone from the
// store under that same epoch has caught the store going back.
func (s *State) Held(holder, token string) { s.holdings.Store(holder, token) }

// HeldUnder returns the epoch the holding holder was handed out under, ""
// when this store value did not hand it out or it was given back.
func (s *State) HeldUnder(holder string) string {
	token, _ := s.holdings.Load(holder)
	t, _ := token.(string)
	return t
}

// Released forgets the holding holder.
func (s *State) Released(holder string) { s.holdings.Delete(holder) }

// NewState returns the state of a store value that has not seen its store
// yet. grace <= 0 waits for nothing.
func NewState(c clock.Clock, grace time.Duration) *State {
	return &State{clock: c, grace: grace, floors: map[string]int64{}}
}

// Grace returns the wait after a new epoch given to NewState; <= 0 is none.
func (s *State) Grace() time.Duration { return s.grace }

// Token returns the epoch token the store value works under.
func (s *State) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// ReadyAt returns when the current epoch may hand things out.
func (s *State) ReadyAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readyAt
}

// Set makes token the current epoch: nothing is handed out before its
// creation time plus the grace. It marks the floors for re-seeding.
func (s *State) Set(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
	s.readyAt = time.Time{}
	if created, ok := Created(token); ok && s.grace > 0 && !BrandNew(token) {
		s.readyAt = created.Add(s.grace)
	}
	s.reseed = len(s.floors) > 0
}

// Confirm records that an operation sent at sent found the store under the
// epoch this store value works with: everything it holds was still its own
// then.
func (s *State) Confirm(sent time.Time) {
	ns := sent.UnixNano()
	for {
		old := s.confirmed.Load()
		if ns <= old || s.confirmed.CompareAndSwap(old, ns) {
			return
		}
	}
}

// Confirmed returns when the newest operation that found the store under
// this store value's epoch was sent; the zero time if none did.
func (s *State) Confirmed() time.Time {
	ns := s.confirmed.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Wait sleeps on the clock until the current epoch may hand things out, and
// returns its token.
func (s *State) Wait(ctx context.Context) (string, error) {
	for {
		s.mu.Lock()
		token, d := s.token, s.readyAt.Sub(s.clock.Now())
		log := s.log
		if d <= 0 || s.waitLogged == token {
			log = nil
		} else {
			s.waitLogged = token
		}
		s.mu.Unlock()
		if d <= 0 {
			return token, nil
		}
		if log != nil {
			// Once per epoch, whoever waits: a start on a store found
			// without an epoch (a first start or a wipe) or an adoption.
			log.Info("idforge: new store epoch (a first start without idforge store init, or a wipe): waiting out the reset grace before handing out IDs",
				"store", s.store, "wait", d.Round(time.Millisecond))
		}
		if err := s.clock.Sleep(ctx, d); err != nil {
			return "", err
		}
	}
}

// Adopt runs create (which makes the store's epoch exist and returns it)
// and sets its result, unless another caller adopted since seen was read.
// It reports whether this call adopted.
func (s *State) Adopt(seen string, create func() (string, error)) (bool, error) {
	s.adopt.Lock()
	defer s.adopt.Unlock()
	if s.Token() != seen {
		return false, nil
	}
	token, err := create()
	if err != nil {
		return false, err
	}
	s.Set(token)
	return true, nil
}

// Floor returns the highest max ID this store value got for name.
func (s *State) Floor(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floors[name]
}

// Raise records maxID as handed out for name.
func (s *State) Raise(name string, maxID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if maxID > s.floors[name] {
		s.floors[name] = maxID
	}
}

// RaiseFunc lifts the stored segment name to at least floor under the epoch
// token; it does nothing when the stored epoch is no longer token.
type RaiseFunc func(ctx context.Context, token, name string, floor int64) error

// Ready re-seeds the floors with raise if an adoption left them pending,
// then waits until the current epoch may hand things out, and returns its
// token. The error says which of the two failed; the store wraps it.
func (s *State) Ready(ctx context.Context, raise RaiseFunc) (string, error) {
	if err := s.Reseed(ctx, raise); err != nil {
		return "", err
	}
	token, err := s.Wait(ctx)
	if err != nil {
		return "", fmt.Errorf("waiting out the reset grace: %w", err)
	}
	return token, nil
}

// ResetError is the error of an operation (what) of the store named store
// that found the epoch seen replaced by current, or gone when current is
// "": it wraps engine.ErrStoreReset and says when the store value hands
// things out again.
func (s *State) ResetError(store, what, seen, current string) error {
	now := "gone"
	if current != "" {
		now = fmt.Sprintf("replaced by %q", current)
	}
	return fmt.Errorf("%s: %s: %w: epoch %q is %s; nothing is handed out before %s",
		store, what, engine.ErrStoreReset, seen, now, s.ReadyAt().UTC().Format(time.RFC3339Nano))
}

// Reset is a store's answer to an operation (what) of the store named
// store that found the epoch seen replaced by current ("" when gone): it
// adopts the epoch now stored (create makes one when there is none),
// re-seeds the floors with raise at once, before the grace ends, and
// returns an error wrapping engine.ErrStoreReset. A failed re-seed is named
// in that error too, and Ready retries it before the next fetch.
func (s *State) Reset(ctx context.Context, store, what, seen, current string, create func() (string, error), raise RaiseFunc) error {
	if _, err := s.Adopt(seen, create); err != nil {
		return fmt.Errorf("%w (%w)", s.ResetError(store, what, seen, current), err)
	}
	reset := s.ResetError(store, what, seen, current)
	if err := s.Reseed(ctx, raise); err != nil {
		return fmt.Errorf("%w; %w, retried before the next fetch", reset, err)
	}
	return reset
}

// Reseed calls raise for every name with its floor if the floors have not
// been re-seeded under the current epoch; a failure leaves them pending for
// the next call.
func (s *State) Reseed(ctx context.Context, raise RaiseFunc) error {
	s.mu.Lock()
	if !s.reseed {
		s.mu.Unlock()
		return nil
	}
	token := s.token
	floors := make(map[string]int64, len(s.floors))
	for k, v := range s.floors {
		floors[k] = v
	}
	s.mu.Unlock()
	for name, floor := range floors {
		if err := raise(ctx, token, name, floor); err != nil {
			return fmt.Errorf("re-seeding segment %q at %d: %w", name, floor, err)
		}
	}
	s.mu.Lock()
	if s.token == token {
		s.reseed = false
	}
	s.mu.Unlock()
	return nil
}

// FloorMark records the epoch under which one distributor last raised its
// sequence to its Floor's answer. The zero value has raised nothing.
type FloorMark struct {
	mu    sync.Mutex
	token string
	why   error // the Floor's last engine.ErrNoFloor answer, for the refusal
}

// Why returns the Floor's last answer wrapping engine.ErrNoFloor, nil if
// it gave none.
func (m *FloorMark) Why() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.why
}

func (m *FloorMark) done(token string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token == token
}

// ApplyFloor raises the segment name to the answer of floor (nil for none)
// with raise, under the epoch token, unless mark says it did so under this
// epoch already: a store calls it before each fetch, so floor runs at a
// distributor's first fetch and its first after every adoption of an epoch.
// A floor answering engine.ErrNoFloor counts as none. Other errors wrap
// engine.ErrStoreUnavailable, or engine.ErrInvalidConfig for a negative
// answer, and name the Floor.
func (s *State) ApplyFloor(ctx context.Context, token, name string, floor engine.Floor, start int64, raise RaiseFunc, mark *FloorMark) error {
	if floor == nil || mark.done(token) {
		return nil
	}
	least, ok, err := Least(ctx, func(ctx context.Context, name string) (int64, error) {
		n, err := floor(ctx, name)
		if errors.Is(err, engine.ErrNoFloor) {
			mark.mu.Lock()
			mark.why = err
			mark.mu.Unlock()
		}
		return n, err
	}, name, start)
	if err != nil || !ok {
		return err
	}
	mark.mu.Lock()
	mark.why = nil
	mark.mu.Unlock()
	if err := raise(ctx, token, name, least); err != nil {
		return fmt.Errorf("%w: raising the counter to the Floor's %d: %w", engine.ErrStoreUnavailable, least, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == token {
		mark.mu.Lock()
		mark.token = token
		mark.mu.Unlock()
		// The answer is this store value's floor too: a counter found below
		// it later (the raise lost with the epoch intact, before any fetch
		// succeeded) is a store that went back, not a fresh name.
		if least > s.floors[name] {
			s.floors[name] = least
		}
	}
	return nil
}

// Least returns the least the counter of name may hold: the larger of start
// and floor's answer; ok is false when floor is nil or answers
// engine.ErrNoFloor. A failing or panicking floor wraps
// engine.ErrStoreUnavailable, a negative answer engine.ErrInvalidConfig;
// each names the Floor.
func Least(ctx context.Context, floor engine.Floor, name string, start int64) (_ int64, ok bool, err error) {
	if floor == nil {
		return start, false, nil
	}
	// It runs on whatever goroutine fetches, often a chain's background
	// refill, where a panic would end the process.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: Floor(%q) panicked: %v", engine.ErrStoreUnavailable, name, r)
		}
	}()
	n, err := floor(ctx, name)
	switch {
	case errors.Is(err, engine.ErrNoFloor):
		return start, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("%w: Floor(%q): %w", engine.ErrStoreUnavailable, name, err)
	case n < 0:
		return 0, false, fmt.Errorf("%w: Floor(%q) = %d, want >= 0", engine.ErrInvalidConfig, name, n)
	}
	return max(start, n), true, nil
}

// Floors combines floors (nil ones skipped) into one whose answer is the
// largest of theirs, nil when none is left. It answers engine.ErrNoFloor
// only when each of them does.
func Floors(floors ...engine.Floor) engine.Floor {
	floors = slices.DeleteFunc(slices.Clone(floors), func(f engine.Floor) bool { return f == nil })
	switch len(floors) {
	case 0:
		return nil
	case 1:
		return floors[0]
	}
	return func(ctx context.Context, name string) (int64, error) {
		best, known := int64(0), false
		for _, f := range floors {
			n, err := f(ctx, name)
			switch {
			case errors.Is(err, engine.ErrNoFloor):
				continue
			case err != nil:
				return 0, err
			}
			best, known = max(best, n), true
		}
		if !known {
			return 0, engine.ErrNoFloor
		}
		return best, nil
	}
}

// NoFloorError is the refusal of a store (named store) to create the
// missing sequence name under an epoch that is not brand-new without a Floor;
// why is the Floor's own ErrNoFloor answer, if it gave one. It is one short
// line: what, which sequence, the two remedies. docs/errors.md explains.
func NoFloorError(store, name string, why error) error {
	err := fmt.Errorf("%s: sequence %q: %w: add a Floor (Registry.AddFloor; tagged tables get one) "+
		"or, on a store that never handed out IDs, run idforge store init (see docs/errors.md)", store, name, engine.ErrNoFloor)
	// The registry's own answer when no Floor was added says nothing more.
	if why != nil && why.Error() != engine.ErrNoFloor.Error() {
		return fmt.Errorf("%w (the Floor: %v)", err, why)
	}
	return err
}

// UntrustedError is the refusal of a store (named store) to serve the
// sequence name from a counter that may be older than what was handed out:
// the store was declared restored (`idforge store restored`), was found
// without its epoch while holding counters, or went back under a live
// process. counter is what the store holds, a lower bound only; why is the
// Floor's own ErrNoFloor answer, if it gave one.
func UntrustedError(store, name string, counter int64, why error) error {
	err := fmt.Errorf("%s: segment %q: %w: its counter (%d) may be older than what was handed out "+
		"(the store was declared restored, was found without its epoch, or went back), so it is served only above a Floor "+
		"that reads where the data ends (the GORM plugin and the sharding repositories derive one from the tagged columns; "+
		"stores take Settings.Floor), or once an operator who knows where the data ends runs `idforge store chain %s -raise N`",
		store, name, engine.ErrNoFloor, counter, name)
	if why != nil {
		return fmt.Errorf("%w (the Floor: %v)", err, why)
	}
	return err
}
