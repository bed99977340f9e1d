//go:build unix

package server

import (
	"fmt"
	"os"
	"syscall"
)

// openTokens opens the tokens file without blocking: opening a FIFO for
// reading would wait for a writer, holding up a reload and the shutdown
// behind it.
func openTokens(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// checkOwner refuses a tokens file owned by anyone but the server's user
// or root: its owner can rewrite it, adding callers of its own.
func checkOwner(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("owned by user %d, not by this server's user %d (or root): whoever owns it can add callers; chown it", st.Uid, uid)
	}
	return nil
}
