//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
)

var errNeedsLinux = errors.New("the torture driver injects faults with Linux signals (SIGSTOP, SIGCONT, parent-death signal); run it on Linux or with -faults none")

func setProcAttr(*exec.Cmd) {}

func checkSignals() error { return errNeedsLinux }

func stopProc(*os.Process) error { return errNeedsLinux }

func contProc(*os.Process) error { return errNeedsLinux }
