//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || windows)

package leased

import "os"

// hostLocking says whether lockFile excludes other processes: not on this
// system, which has no file lock the standard library reaches.
const hostLocking = false

// lockFile opens (creating it) the file at path without locking it:
// nothing tells two processes on one machine ID apart here. LocalState
// warns once per process.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
