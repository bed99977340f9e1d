//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package leased

import (
	"errors"
	"os"
	"syscall"
)

// hostLocking says whether lockFile excludes other processes.
const hostLocking = true

// lockFile opens (creating it) and locks the file at path with flock
// LOCK_EX|LOCK_NB: errLocked when another open file holds the lock. The
// kernel releases the lock when the last descriptor closes, also when the
// process is killed; the descriptor is close-on-exec, so a child process
// never inherits it.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}
