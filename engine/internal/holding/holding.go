// Package holding words alike what the stores say about holdings of
// machine IDs (machine.State.Holder). It is engine-only: the SQL and Redis
// stores and machinetest's reference distributor use it.
package holding

import (
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
)

// LiveWindow is how long after its stored last timestamp a stable
// instance's holding counts as live (negative: how long before), for a
// store with reset grace grace and ride-through window w. A live holder
// heartbeats every few hundred milliseconds, each time storing its clock
// plus w, so its last timestamp stays near now + w; one that has not
// heartbeated for the skew the grace allows (grace - w, at least
// storeepoch.SkewMargin) plus two seconds has stopped or is cut off, and
// either way its lease issues nothing past its last timestamp, which the
// next holder waits out. So a stable instance restarted after kill -9 gets
// its row back within seconds and waits out at most w; a cut-off holder that
// comes back finds another holder and stops. Without a window (w < 0) the
// holder stores its clock alone and the grace, never less than the default,
// is the window.
func LiveWindow(grace, w time.Duration) time.Duration {
	if w < 0 {
		return max(grace, storeepoch.DefaultGrace)
	}
	return max(grace-w, storeepoch.SkewMargin) + 2*time.Second - w
}

// InUse describes machine ID id of a stable instance, held live by holder h
// whose last heartbeat stored last (Unix ms): the detail of an error
// wrapping engine.ErrInstanceInUse.
func InUse(id int64, h machine.Holder, last int64, window time.Duration) string {
	return fmt.Sprintf("machine ID %d is held live by holder %s, whose last heartbeat stored %s; "+
		"it goes back to this instance once that holder reverts it, or at %s if it stays silent",
		id, h, fmtMilli(last), fmtMilli(last+window.Milliseconds()))
}

// Taken describes a machine ID the caller's instance holds under holder
// found, not the presented one: the detail of an error wrapping
// engine.ErrMachineIDLost.
func Taken(found, presented machine.Holder) string {
	return fmt.Sprintf("this instance ID holds it under holder %s, not %s: another process with this instance ID took it over, or the holding was reverted",
		found, presented)
}

func fmtMilli(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// CheckRelease refuses an operator's release of a live holding unless force
// is set: a holder that stored a timestamp within [LiveWindow] before now
// may be issuing.
func CheckRelease(a machine.Assignment, now int64, window time.Duration, force bool) error {
	if force || !a.Held || a.LastTimestamp <= now-window.Milliseconds() {
		return nil
	}
	kind := "unstable"
	if a.Instance.Stable {
		kind = "stable"
	}
	return fmt.Errorf("namespace %q: machine ID %d is held by %s instance %q, which stored the timestamp %s, within %v of now: "+
		"it may still be issuing; stop it first, or release with -force (it then stops issuing at its next heartbeat): %w",
		a.Instance.Namespace, a.MachineID, kind, a.Instance.ID,
		fmtMilli(a.LastTimestamp), window, engine.ErrInstanceInUse)
}
