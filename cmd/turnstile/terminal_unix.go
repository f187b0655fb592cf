//go:build unix

package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// stdinTerminal reports whether stdin is a terminal.
func stdinTerminal() bool {
	_, err := unix.IoctlGetInt(syscall.Stdin, unix.TIOCGPGRP)
	return err == nil
}
