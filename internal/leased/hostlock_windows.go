//go:build windows

package leased

import (
	"errors"
	"os"
	"syscall"
)

// hostLocking says whether lockFile excludes other processes.
const hostLocking = true

// errSharingViolation is ERROR_SHARING_VIOLATION: the file is open
// without the sharing asked for.
const errSharingViolation syscall.Errno = 32

// lockFile opens (creating it) the file at path for writing while sharing
// it for reading only: no other open file can write it until this one is
// closed, which Windows does when the process ends, however it ends.
// errLocked when another open file holds it. Others may still read it, so
// they can name the holder's PID.
func lockFile(path string) (*os.File, error) {
	p, err := syscall.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, syscall.FILE_SHARE_READ, nil,
		syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if errors.Is(err, errSharingViolation) {
		return nil, errLocked
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(h), path), nil
}
