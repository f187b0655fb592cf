//go:build unix && !linux

package main

import "syscall"

// setParentDeathSignal does nothing here: the system has no parent-death
// signal, so a command outlives a turnstile killed with SIGKILL.
func setParentDeathSignal(*syscall.SysProcAttr) {}
