//go:build unix

package main

import (
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundTerminal reports whether stdin is a terminal whose foreground
// process group is ours — the case where a shell would hand the terminal
// to the command — and returns its descriptor.
func foregroundTerminal() (fd int, ok bool) {
	fd = syscall.Stdin
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return 0, false
	}
	return fd, pgrp == unix.Getpgrp()
}

// holdTerminalInBackground prepares turnstile to live in the background
// of the terminal while the command owns it, and returns the function that
// takes the terminal back once the command has exited. SIGTTOU is ignored
// meanwhile: without that, a message written to the terminal (with
// "stty tostop") or taking the terminal back would stop turnstile itself.
// It is ignored only after the command started, so the command does not
// inherit the disposition.
func holdTerminalInBackground() (restore func(tty int)) {
	signal.Ignore(syscall.SIGTTOU)
	return func(tty int) {
		_ = unix.IoctlSetPointerInt(tty, unix.TIOCSPGRP, unix.Getpgrp())
		signal.Reset(syscall.SIGTTOU)
	}
}
