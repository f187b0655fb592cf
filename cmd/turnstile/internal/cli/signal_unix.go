//go:build unix

package cli

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// StopSignals are the signals that stop a command: "turnstile run" passes
// them on to its command's process group, the demo and bench stop their
// runs. SIGHUP is among them so that closing the terminal stops the
// command the way it would stop it without turnstile; SIGQUIT so that it
// quits the command as it would without turnstile, instead of making
// turnstile print its goroutines over the command's output.
var StopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalName is the name a shell user knows a signal by, such as SIGINT.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}
