package leased

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
)

// errLocked is lockFile's answer when another open file holds the lock.
var errLocked = errors.New("locked")

// hostLocks is the process-wide record of the lock files this process
// holds, by path. A lock conflicts between two open files of one process
// too, so the record is what tells a second Distribute of the instance
// holding the lock (which keeps it) from another instance of this process
// (refused, as [hold] refuses a second lease). It is process-wide by
// nature, as the locks are.
var hostLocks = struct {
	sync.Mutex
	m map[string]*hostLock
}{m: map[string]*hostLock{}}

// hostLock is a lock file held open (and so locked) by this process for
// one instance.
type hostLock struct {
	f    *os.File
	inst string
}

// heldError is the refusal of a machine ID whose lock file another process
// on this host holds. It wraps engine.ErrInstanceInUse; [Acquire] tells it
// from a store's refusal of a stable instance, whose remedy differs.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return engine.ErrInstanceInUse }

// lockRemedy ends the refusal of a machine ID held by another process.
const lockRemedy = "two processes on one host must not issue IDs under one machine ID: " +
	"give this one another (IDFORGE_MACHINE_ID, machine.Manual), or use a shared store (engine/sqlstore, engine/redisstore) that leases each process its own"

// take locks the lock file path of machine ID id of inst.Namespace for
// inst. fresh is false when inst already held it. A lock held by another
// instance of this process is an error wrapping engine.ErrInvalidConfig;
// by another process, a *heldError naming its PID; a lock file that cannot
// be opened, an error wrapping engine.ErrStoreUnavailable.
func take(path string, id int64, inst machine.Instance) (fresh bool, err error) {
	hostLocks.Lock()
	defer hostLocks.Unlock()
	if h := hostLocks.m[path]; h != nil {
		if h.inst == inst.ID {
			return false, nil
		}
		return false, fmt.Errorf("%w: machine: machine ID %d of namespace %q is held by instance %q of this process (lock file %s); "+
			"share its generator (one registry per process), or give each registry its own machine ID",
			engine.ErrInvalidConfig, id, inst.Namespace, h.inst, path)
	}
	f, err := lockFile(path)
	switch {
	case errors.Is(err, errLocked):
		return false, &heldError{msg: fmt.Sprintf("%v: machine: machine ID %d of namespace %q is held by %s on this host (lock file %s): %s",
			engine.ErrInstanceInUse, id, inst.Namespace, lockHolder(path), path, lockRemedy)}
	case err != nil:
		return false, fmt.Errorf("%w: machine: locking machine ID %d: %v; %s", engine.ErrStoreUnavailable, id, err, stateDirRemedy)
	}
	// Who holds it, for the refusal of the next process; the lock, not
	// this content, is what counts.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0)
	}
	hostLocks.m[path] = &hostLock{f: f, inst: inst.ID}
	return true, nil
}

// lockHolder describes the process whose PID the lock file at path holds.
func lockHolder(path string) string {
	data, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	switch {
	case err != nil:
		return "another process (its PID is not written yet)"
	case pid == os.Getpid():
		return fmt.Sprintf("this process (PID %d, through another path to the directory)", pid)
	}
	return fmt.Sprintf("process %d", pid)
}

// holds reports whether inst holds the lock file path, and whether the
// file at path is still the one locked (not deleted or replaced). other
// names another instance of this process holding it, if one does.
func holds(path string, inst machine.Instance) (held, same bool, other string) {
	hostLocks.Lock()
	defer hostLocks.Unlock()
	h := hostLocks.m[path]
	switch {
	case h == nil:
		return false, false, ""
	case h.inst != inst.ID:
		return false, false, h.inst
	}
	return true, sameFile(h.f, path), ""
}

// sameFile reports whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// drop releases the lock file path if inst holds it. The file stays:
// removing it would let a process that opened it before the removal lock a
// file nobody else sees.
func drop(path string, inst machine.Instance) {
	hostLocks.Lock()
	defer hostLocks.Unlock()
	if h := hostLocks.m[path]; h != nil && h.inst == inst.ID {
		h.f.Close() // closing the last descriptor releases the lock
		delete(hostLocks.m, path)
	}
}
