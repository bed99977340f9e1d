package machine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/idforge/idforge/engine/internal/distcheck"
)

// Instance identifies one running copy of a service inside a namespace.
type Instance struct {
	// Namespace groups the instances that share one machine-ID space,
	// usually the service name.
	Namespace string
	// ID is unique per running instance: host:port, a pod name, or any
	// explicit string. Two processes running with one ID share its machine
	// ID and will issue duplicates.
	ID string
	// Stable instances (a StatefulSet pod, a fixed host) keep their machine ID
	// across restarts: Revert leaves it assigned to them and no other instance
	// ever reclaims it.
	Stable bool
}

// State is a machine ID with the last timestamp issued under it, and the
// holding it belongs to.
type State struct {
	MachineID int64
	// LastTimestamp is the Unix time in milliseconds of the last ID (or
	// heartbeat) under this machine ID, 0 if unknown. A generator starting
	// with this machine ID waits until its clock passes it.
	LastTimestamp int64
	// Holder is the secret of this holding of the machine ID: a store makes
	// a new one at every Distribute and records it with the ID, and Guard
	// and Revert must present it. It tells two processes with one instance
	// ID apart. Distributors that store nothing ([Manual], [StatefulSet])
	// leave it empty.
	Holder Holder
}

// Holder is the secret that proves a holding of a machine ID (see
// [State].Holder). Whoever knows it can heartbeat and give back the ID, so
// it is never logged: String gives a short fingerprint instead.
type Holder string

// String returns the first 8 hex digits of the secret's SHA-256, enough to
// tell holders apart in logs and errors; "none" for an empty Holder.
func (h Holder) String() string {
	if h == "" {
		return "none"
	}
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:4])
}

// Distributor stores machine-ID assignments. Every method is atomic in the
// store: two instances racing never receive the same machine ID.
//
// A store judges expiry by "now" in Unix milliseconds read from a
// clock.Clock it is configured with (so tests can drive it with clocktest.Fake),
// not by the database or Redis server time. All instances of a namespace use
// the same machineBits.
type Distributor interface {
	// Distribute returns the machine ID for inst, in [0, 2^machineBits),
	// trying in this order:
	//
	//   - self: the ID inst already holds (a stable instance still holds its
	//     ID after Revert). If inst is stable and another process holds the
	//     ID live (it did not Revert, and its stored last timestamp is later
	//     than now minus the store's live window: at least a second, at
	//     most safeGuard), Distribute changes nothing and fails with an
	//     error wrapping engine.ErrInstanceInUse: two processes run with one
	//     instance ID. An unstable inst takes its ID over, and the previous
	//     holder's next Guard fails;
	//   - reclaim: an ID nobody holds (an unstable instance reverted it), or
	//     one held by an unstable instance whose stored last timestamp is
	//     <= now - safeGuard. IDs held by stable instances are never
	//     reclaimed; retiring one is an operator's job in the store. A free
	//     ID whose stored last timestamp is ahead of now (its last holder's
	//     clock ran fast) is skipped: the next holder would have to wait it
	//     out;
	//   - new: a number never handed out;
	//   - a skipped free ID, the least far ahead first;
	//
	// and otherwise fails with an error wrapping engine.ErrMachineIDOverflow.
	// The returned LastTimestamp is the ID's stored last timestamp before
	// this call (0 for a new number): the generator waits until its clock
	// passes it. The returned Holder is new: the store records it with inst
	// (and inst.Stable) as the holder and raises the stored timestamp to at
	// least now, so the ID cannot be reclaimed for safeGuard. Arguments
	// that are invalid (an empty namespace or instance ID, machineBits
	// outside [1, 31], a safe-guard that is not positive) give an error wrapping
	// engine.ErrInvalidConfig; a failing store, one wrapping
	// engine.ErrStoreUnavailable.
	Distribute(ctx context.Context, inst Instance, machineBits int, safeGuard time.Duration) (State, error)
	// Guard records that inst still holds st.MachineID under st.Holder,
	// raising the stored last timestamp to st.LastTimestamp (never lowering
	// it: a delayed, older heartbeat must not make a live ID look expired).
	// If inst does not hold st.MachineID under st.Holder any more, because
	// another instance reclaimed it after inst was silent for safeGuard or
	// another process with inst's ID took it over, Guard changes nothing
	// and returns an error wrapping engine.ErrMachineIDLost that names the
	// holder it found.
	Guard(ctx context.Context, inst Instance, st State) error
	// Revert gives the machine ID back when inst stops, storing
	// st.LastTimestamp for whoever takes the ID next. It may be below what
	// Guard stored: the caller passes at least the newest timestamp it
	// used, so a clean stop leaves no reservation to wait out (a Lease
	// passes its reservations too unless it has a TimestampSource). An
	// unstable inst releases the ID; a stable one keeps holding it, with no
	// live holder, so its next Distribute gets it at once. If inst does not
	// hold st.MachineID under st.Holder, Revert changes nothing (it must
	// never free the new holder's ID) and returns an error wrapping
	// engine.ErrMachineIDLost.
	Revert(ctx context.Context, inst Instance, st State) error
	// Terms returns what the distributor's store promises every lease on
	// it (see [Terms]). A remote store may learn them at Distribute, so
	// the lease asks again afterwards. A distributor that wraps another
	// returns the inner one's terms, changing only what it changes.
	Terms() Terms
	// ServerTime returns the current time of the store's server, for a
	// store that keeps time of its own (a database or Redis server): the
	// lease compares its clock with it before distributing, because expiry
	// decisions compare timestamps written by one host's clock with
	// another host's clock, and refuses a clock further off than its skew
	// margin (an error wrapping engine.ErrClockSkew). The zero time means
	// the store has no clock apart from this process's (SQLite, a fixed
	// machine ID), and nothing is compared.
	ServerTime(ctx context.Context) (time.Time, error)
}

// Terms are what a distributor's store promises every lease on it: the
// safety terms the lease and the registry check against, part of the
// contract so that no wrapper can drop one.
type Terms struct {
	// RideThrough is the store's ride-through window: how long a process
	// cut off from the store goes on issuing, which each lease heartbeat
	// reserves ahead (the RideThrough setting of engine/sqlstore and
	// engine/redisstore, recorded by the store and the same for every
	// process of it). 0: the store sets none, and a lease reserves 4 ×
	// its Heartbeat; negative: no reservation.
	RideThrough time.Duration
	// ResetGrace is how long the store, once it finds it was reset (it
	// forgot what it handed out), hands nothing out after the reset was
	// first seen: the time live processes of the forgotten state have to
	// stop. A lease that could go on issuing without its store for that
	// long is refused, since a process cut off from the store during a
	// reset would then share its machine ID with a newcomer. <= 0: no
	// grace (a store no other process uses), nothing is checked.
	ResetGrace time.Duration
	// Remembers is true for a store that keeps the last timestamp of the
	// machine IDs it hands out. [Manual] and [StatefulSet] (and so
	// [Default]) keep nothing: a process restarted on their fixed ID knows
	// what its predecessor issued only from a local state file, which the
	// registry then keeps by default.
	Remembers bool
}

// Assignment is one machine ID of a namespace as a store holds it: what
// the operator's commands list ([Admin].Machines, `idforge store
// machines`).
type Assignment struct {
	MachineID int64
	// Instance is the instance the ID is assigned to, its ID empty when
	// the ID is free.
	Instance Instance
	// Held is true while a holder has the ID (it did not give it back).
	Held bool
	// LastTimestamp is the newest Unix millisecond timestamp stored for it.
	LastTimestamp int64
}

// Admin is the operator's commands on a shared store (`idforge store
// machines|release|chain|ride-through|restored`), declared once for every
// store: engine/sqlstore's and engine/redisstore's OpenAdmin return one. It
// hands out no IDs and holds no machine ID.
type Admin interface {
	// Machines lists the machine IDs of namespace, in order: every ID ever
	// handed out, with its instance (none once free), whether a holding of
	// it is live and its last timestamp.
	Machines(ctx context.Context, namespace string) ([]Assignment, error)
	// Release gives machineID of namespace back, keeping its last timestamp
	// for the next holder to wait out. A live holding (one that stored a
	// timestamp recently enough to be issuing) is refused with an error
	// wrapping engine.ErrInstanceInUse unless force is set; an ID never
	// handed out, with one wrapping engine.ErrInvalidConfig.
	Release(ctx context.Context, namespace string, machineID int64, force bool) error
	// Counter returns the counter of the sequence name (the largest ID
	// handed out ranges up to) and whether the sequence exists.
	Counter(ctx context.Context, name string) (counter int64, found bool, err error)
	// RaiseCounter raises the counter of name to at least to (never lowers
	// it), creating the sequence if it is missing (the operator vouches no
	// ID above to was handed out), and returns the counter.
	RaiseCounter(ctx context.Context, name string, to int64) (int64, error)
	// SetRideThrough rewrites the ride-through window the store records
	// and returns the one it replaced (0 when there was none). While a
	// machine ID was heartbeated within the old window plus the reset
	// grace its holder may be issuing under the old window, so that is
	// refused with an error wrapping engine.ErrInstanceInUse unless force
	// is set.
	SetRideThrough(ctx context.Context, w time.Duration, force bool) (old time.Duration, err error)
	// BrandNew reports whether the store's epoch is brand-new: declared so
	// by the store's Settings.Init (or `idforge store init`) on a store
	// that never handed out an ID.
	BrandNew() bool
	// EpochCreated returns when the store's epoch was created, by the
	// clock of the process that created it.
	EpochCreated() time.Time
	// Restored declares the store restored from a backup: a new epoch, and
	// every sequence counter untrusted until a Floor, a re-seed by a
	// process that ran across the restore, or RaiseCounter puts it above
	// what was handed out.
	Restored(ctx context.Context) error
	// Close releases what the Admin holds of its own (prepared
	// statements); the *sql.DB or Redis client it was opened on stays
	// open.
	Close() error
}

// MaxSafeGuard is the longest safe-guard duration a distribution accepts
// (Settings.SafeGuard): a week of silence before a machine ID may be
// reclaimed is beyond any outage worth riding out, and keeps every sum of
// it with a clock reading or a window far from overflowing.
const MaxSafeGuard = distcheck.MaxSafeGuard

// Validate reports what every distributor refuses in an instance: an empty
// namespace or instance ID, or one that is not printable UTF-8 text, with
// an error wrapping engine.ErrInvalidConfig. A wrapper checks with it
// before asking its store.
func (i Instance) Validate() error { return distcheck.Instance(i.Namespace, i.ID) }

// ValidateDistribute reports what every distributor refuses in the
// arguments of Distribute: an invalid instance, machineBits outside
// [1, 31] or a safe-guard outside (0, MaxSafeGuard], with an error wrapping
// engine.ErrInvalidConfig.
func ValidateDistribute(inst Instance, machineBits int, safeGuard time.Duration) error {
	return distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard)
}
