//go:build !unix

package cli

import "os"

// StopSignals are the signals that stop a command: on systems without
// POSIX signals, only an interrupt.
var StopSignals = []os.Signal{os.Interrupt}

// signalName is the name of a signal as the system gives it.
func signalName(sig os.Signal) string { return sig.String() }
