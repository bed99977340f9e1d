//go:build !linux

package testdb

import "os/exec"

// setRedisProcAttr does nothing where there is no parent-death signal: the
// caller kills the server itself.
func setRedisProcAttr(*exec.Cmd) {}
