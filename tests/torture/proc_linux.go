package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr makes a worker die with the driver (a driver killed while a
// worker is stopped must not leave it stopped forever) and puts it in a
// process group of its own, so ^C reaches only the driver, which then
// retires the workers and still reports.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

func checkSignals() error { return nil }

func stopProc(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

func contProc(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
