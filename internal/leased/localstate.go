package leased

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
)

type localState struct {
	dir   string
	inner machine.Distributor
	log   *slog.Logger
}

// unconfigured is machine.Default's distributor when nothing names a
// machine ID: any ID that no other process on this host holds will do.
// Unconfigured says why none was named.
type unconfigured interface {
	Unconfigured() string
}

// LocalState decorates inner with a state file per (namespace, machine ID)
// in dir holding "machineId|lastTimestamp", so a restarted process waits out a clock that
// went back while it was down even when inner stores no timestamp ([machine.Manual],
// [machine.StatefulSet]). The file follows the machine ID, not the instance: what
// must be waited out is the last time anything on this host issued under
// that ID, whichever instance did.
//
// When inner stores no timestamp ([Remembers] is false) nothing else keeps
// two processes off one machine ID, so the state file has a lock file
// beside it, "<namespace>#<machine ID>.lock", which Distribute locks
// (flock on Unix; on Windows the file is held open without write sharing)
// and Revert releases; the system releases it when the process dies, even
// by kill -9. The lock file holds its holder's PID. A machine ID whose lock
// file another process holds is refused with an error wrapping
// engine.ErrInstanceInUse that names the ID, the lock file, the holder's
// PID and the remedy; one held by another instance of this process, with
// engine.ErrInvalidConfig. Guard checks that the lock file is still the one
// locked, taking a new one if it was deleted, and reports
// engine.ErrMachineIDLost if another process holds that. With inner
// machine.Default() and no machine ID configured, Distribute takes the lowest
// machine ID whose lock is free and logs which one, as a warning, to log
// (slog.Default() if nil). On systems without such a lock (AIX, Solaris,
// WebAssembly) nothing is locked and LocalState warns once per process.
//
// Distribute asks inner, then, if there is a file for the machine ID inner
// handed out, returns the later of the two last timestamps, and writes it
// to the file: a directory that cannot take the file fails the start, not a
// heartbeat later (the ID is given back). Guard and Revert write the file
// and then call inner, reporting both errors. A write goes to a synced
// temporary file renamed over the old one, and then syncs the directory,
// so a crash or a power loss leaves the old or the new state, never half of
// one; the timestamp never goes back. With a lease's reservation (on by
// default) every heartbeat writes the reserved time, so a process killed
// with kill -9 has issued nothing past what the file says.
//
// The holder secret ([machine.State].Holder), the store's terms and its
// server clock pass through to and from inner; the file holds none of them.
//
// An empty dir or a nil inner makes every method fail with
// engine.ErrInvalidConfig; an unreadable, corrupt or unwritable file, with
// engine.ErrStoreUnavailable and an error naming the path.
func LocalState(dir string, inner machine.Distributor, log *slog.Logger) machine.Distributor {
	if log == nil {
		log = slog.Default()
	}
	return localState{dir: dir, inner: inner, log: log}
}

// Terms are inner's, and the file keeps the last timestamps (zero terms
// without an inner, which every other method refuses).
func (s localState) Terms() machine.Terms {
	var t machine.Terms
	if s.inner != nil {
		t = s.inner.Terms()
	}
	t.Remembers = true
	return t
}

// ServerTime is inner's (the zero time without an inner).
func (s localState) ServerTime(ctx context.Context) (time.Time, error) {
	if s.inner == nil {
		return time.Time{}, nil
	}
	return s.inner.ServerTime(ctx)
}

// locks reports whether the machine IDs of inner are locked on the host.
func (s localState) locks() bool { return !s.inner.Terms().Remembers }

// noLockOnce warns, once per process, where no lock file can be locked.
var noLockOnce sync.Once

func (s localState) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := s.check(inst); err != nil {
		return machine.State{}, err
	}
	if s.locks() && !hostLocking {
		noLockOnce.Do(func() {
			s.log.Warn("idforge: no file locking on " + runtime.GOOS + ": two processes on this host with one machine ID are not told apart; " +
				"give each its own machine ID or use a shared store")
		})
	}
	var (
		st    machine.State
		fresh bool
		err   error
	)
	if s.locks() {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return machine.State{}, fmt.Errorf("%w: machine: creating the state directory: %v; %s", engine.ErrStoreUnavailable, err, stateDirRemedy)
		}
	}
	if u, ok := s.inner.(unconfigured); ok && hostLocking {
		st, fresh, err = s.lowestFree(inst, machineBits, safeGuard, u.Unconfigured())
	} else {
		st, err = s.inner.Distribute(ctx, inst, machineBits, safeGuard)
		if err == nil && s.locks() {
			fresh, err = take(s.lockPath(inst.Namespace, st.MachineID), st.MachineID, inst)
			if err != nil {
				return machine.State{}, errors.Join(err, s.inner.Revert(ctx, inst, st))
			}
		}
	}
	if err != nil {
		return machine.State{}, err
	}
	// undo gives the ID back when the start fails after all.
	undo := func(err error) (machine.State, error) {
		if fresh {
			drop(s.lockPath(inst.Namespace, st.MachineID), inst)
		}
		return machine.State{}, errors.Join(err, s.inner.Revert(ctx, inst, st))
	}
	saved, found, err := s.read(inst.Namespace, st.MachineID)
	if err != nil {
		return undo(err) // a corrupt file must stop us
	}
	if found {
		st.LastTimestamp = max(st.LastTimestamp, saved.LastTimestamp)
	}
	if err := s.write(inst.Namespace, st, true); err != nil {
		return undo(err)
	}
	return st, nil
}

// lowestFree takes the lowest machine ID whose lock file no other process
// or instance holds, for a distributor with no machine ID configured (why
// says why), and logs it.
func (s localState) lowestFree(inst machine.Instance, machineBits int, safeGuard time.Duration, why string) (machine.State, bool, error) {
	if err := machine.ValidateDistribute(inst, machineBits, safeGuard); err != nil {
		return machine.State{}, false, err
	}
	n := int64(1) << machineBits
	for id := range n {
		path := s.lockPath(inst.Namespace, id)
		fresh, err := take(path, id, inst)
		var held *heldError
		switch {
		case errors.As(err, &held), errors.Is(err, engine.ErrInvalidConfig):
			continue // another process, or another instance of this one
		case err != nil:
			return machine.State{}, false, err
		}
		s.log.Warn("idforge: "+why+": took machine ID "+strconv.FormatInt(id, 10)+", the lowest no other process on this host holds; "+
			"a process on another host would take the same one: set IDFORGE_MACHINE_ID per instance or use a shared store",
			"namespace", inst.Namespace, "machine_id", id, "lock_file", path)
		return machine.State{MachineID: id}, fresh, nil
	}
	return machine.State{}, false, fmt.Errorf("%w: machine: %s, and all %d machine IDs of namespace %q are held by processes on this host (lock files in %s)",
		engine.ErrMachineIDOverflow, why, n, inst.Namespace, s.dir)
}

func (s localState) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := s.check(inst); err != nil {
		return err
	}
	// The file first: it is the local record of what this process issued,
	// true whatever the store answers.
	fileErr := s.write(inst.Namespace, st, true)
	var lockErr error
	if s.locks() {
		lockErr = s.relock(inst, st.MachineID)
	}
	return errors.Join(lockErr, s.inner.Guard(ctx, inst, st), fileErr)
}

// relock checks that inst still holds the lock file of machineID, and
// takes it again if the file was deleted or replaced: the lock on a file
// nobody can open any more keeps nobody out.
func (s localState) relock(inst machine.Instance, machineID int64) error {
	path := s.lockPath(inst.Namespace, machineID)
	held, same, other := holds(path, inst)
	switch {
	case other != "":
		return fmt.Errorf("%w: machine: the lock file %s of machine ID %d is held by instance %q of this process, not %q",
			engine.ErrMachineIDLost, path, machineID, other, inst.ID)
	case held && same:
		return nil
	case held:
		drop(path, inst)
	}
	_, err := take(path, machineID, inst)
	if held := (*heldError)(nil); errors.As(err, &held) {
		return fmt.Errorf("%w: %w", engine.ErrMachineIDLost, err)
	}
	return err
}

func (s localState) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := s.check(inst); err != nil {
		return err
	}
	// A clean close knows what was issued: it may lower a reservation, if
	// it holds the machine ID's lock, and only then.
	lower := true
	if s.locks() {
		path := s.lockPath(inst.Namespace, st.MachineID)
		held, same, other := holds(path, inst)
		if other != "" {
			return fmt.Errorf("%w: machine: the lock file %s of machine ID %d is held by instance %q of this process, not %q",
				engine.ErrMachineIDLost, path, st.MachineID, other, inst.ID)
		}
		lower = held && same
		// Released after the file is written: the next holder reads it.
		defer drop(path, inst)
	}
	fileErr := s.write(inst.Namespace, st, !lower)
	return errors.Join(s.inner.Revert(ctx, inst, st), fileErr)
}

func (s localState) check(inst machine.Instance) error {
	switch {
	case s.dir == "":
		return fmt.Errorf("%w: machine: LocalState needs a directory", engine.ErrInvalidConfig)
	case s.inner == nil:
		return fmt.Errorf("%w: machine: LocalState needs an inner distributor", engine.ErrInvalidConfig)
	}
	return inst.Validate()
}

// path names the state file "<namespace>#<machine ID>.state", the namespace
// escaped so any namespace gives one plain file name inside dir.
func (s localState) path(namespace string, machineID int64) string {
	return filepath.Join(s.dir, escapeName(namespace)+"#"+strconv.FormatInt(machineID, 10)+".state")
}

// lockPath names the lock file beside the state file: the state file is
// replaced by a rename at every write, so it cannot carry the lock.
func (s localState) lockPath(namespace string, machineID int64) string {
	return filepath.Join(s.dir, escapeName(namespace)+"#"+strconv.FormatInt(machineID, 10)+".lock")
}

// escapeName keeps letters, digits, '-', '_' and '.' and writes every other
// byte as %XX: reversible (no two names share a file), and free of path
// separators and characters some file systems reject (':' on Windows).
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// read returns the saved state; found is false when there is no file yet.
func (s localState) read(namespace string, machineID int64) (st machine.State, found bool, err error) {
	p := s.path(namespace, machineID)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return machine.State{}, false, nil
	}
	if err != nil {
		return machine.State{}, false, fmt.Errorf("%w: machine: reading state file: %v", engine.ErrStoreUnavailable, err)
	}
	id, ts, ok := strings.Cut(strings.TrimSpace(string(data)), "|")
	if ok {
		st.MachineID, err = strconv.ParseInt(id, 10, 64)
		if err == nil {
			st.LastTimestamp, err = strconv.ParseInt(ts, 10, 64)
		}
	}
	if !ok || err != nil || st.MachineID != machineID {
		return machine.State{}, false, fmt.Errorf("%w: machine: state file %s holds %q, not machineId|lastTimestamp; delete it if the clock is known not to have gone back",
			engine.ErrStoreUnavailable, p, data)
	}
	return st, true, nil
}

// write saves st, keeping a later timestamp already saved if keepLater.
func (s localState) write(namespace string, st machine.State, keepLater bool) error {
	if saved, found, err := s.read(namespace, st.MachineID); keepLater && err == nil && found {
		st.LastTimestamp = max(st.LastTimestamp, saved.LastTimestamp)
	}
	// A corrupt file is replaced: what we write now is the truth.
	p := s.path(namespace, st.MachineID)
	err := os.MkdirAll(s.dir, 0o755)
	if err == nil {
		err = writeAtomic(p, strconv.FormatInt(st.MachineID, 10)+"|"+strconv.FormatInt(st.LastTimestamp, 10))
	}
	if err != nil {
		return fmt.Errorf("%w: machine: writing state file %s: %v; %s", engine.ErrStoreUnavailable, p, err, stateDirRemedy)
	}
	return nil
}

// stateDirRemedy ends the errors of a state file that cannot be written.
const stateDirRemedy = "give the state directory (idforge Settings.StateDir, or " + StateDirEnv + ") a writable place on a volume that outlives the process, " +
	`or set it to "off" to run without a state file`

// writeAtomic replaces path with content through a synced temporary file and
// a rename, atomic on POSIX file systems, then syncs the directory: the
// rename lives in the directory, which a power loss could otherwise roll
// back to the old file.
func writeAtomic(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir flushes dir's entries to disk. A variable, so tests can see it
// called.
var syncDir = func(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // Windows refuses to flush a directory handle
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// StateDirEnv is the environment variable [DefaultStateDir] reads first.
const StateDirEnv = "IDFORGE_STATE_DIR"

// DefaultStateDir is where local state files go when nothing else is said:
// $IDFORGE_STATE_DIR, else "idforge" in the user's cache directory, else
// "idforge" in os.TempDir(). In a container, point IDFORGE_STATE_DIR at a
// volume that outlives the container (an emptyDir outlives container
// restarts of a pod), or, on a read-only file system, set it to "off":
// idforge.New then runs without a state file.
func DefaultStateDir() string {
	if dir := os.Getenv(StateDirEnv); dir != "" {
		return dir
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "idforge")
	}
	return filepath.Join(os.TempDir(), "idforge")
}

// HostInstance returns the unstable instance "hostname:port" in namespace,
// the address that tells one running copy from another. With port 0 (a process that
// listens on no fixed port) it returns "hostname:pid" instead: unique among
// the processes running on the host, but different on every start, so a
// restart never finds its previous machine ID and a [LocalState] file is
// written per run. Set Stable on the result for a host whose hostname and
// port do not change across restarts.
func HostInstance(namespace string, port int) (machine.Instance, error) {
	if port < 0 || port > 65535 {
		return machine.Instance{}, fmt.Errorf("%w: machine: port %d outside [0, 65535]", engine.ErrInvalidConfig, port)
	}
	host, err := os.Hostname()
	if err != nil {
		return machine.Instance{}, fmt.Errorf("%w: machine: reading the hostname for the instance ID: %v", engine.ErrInvalidConfig, err)
	}
	if port == 0 {
		port = os.Getpid()
	}
	inst := machine.Instance{Namespace: namespace, ID: host + ":" + strconv.Itoa(port)}
	return inst, inst.Validate()
}
