package leased

// Abandon ends l the way kill -9 ends a process: the heartbeat stops, nothing
// is reverted, and the machine ID is no longer held in this process. Tests
// use it to start a successor on the same machine ID.
func Abandon(l *Lease) {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end.Store(&ending{err: ErrAbandoned})
	release(l)
}

// ErrAbandoned ends a lease given up by Abandon.
var ErrAbandoned = errAbandoned{}

type errAbandoned struct{}

func (errAbandoned) Error() string { return "abandoned" }

// SetSyncDir replaces the directory sync of state-file writes until the
// test ends.
func SetSyncDir(t interface{ Cleanup(func()) }, f func(dir string) error) {
	prev := syncDir
	syncDir = f
	t.Cleanup(func() { syncDir = prev })
}
