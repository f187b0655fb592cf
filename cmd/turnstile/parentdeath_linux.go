package main

import "syscall"

// setParentDeathSignal makes the kernel send SIGKILL to the command when
// the thread that started it ends; the caller keeps that thread locked
// until the command has exited, so only its parent's death triggers it.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
