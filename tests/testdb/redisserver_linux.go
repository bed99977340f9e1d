package testdb

import (
	"os/exec"
	"syscall"
)

// setRedisProcAttr makes redis-server die with the process that started it
// (a test binary or driver killed must not leave it running) and puts it in
// a process group of its own, so ^C reaches only that process, which then
// stops it itself.
func setRedisProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
