package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalError is the cause of a context cancelled by a signal. Its
// message names the signal as a shell user knows it: "received SIGINT".
type SignalError struct{ Sig os.Signal }

func (e SignalError) Error() string { return "received " + signalName(e.Sig) }

// InterruptCode is the exit code for an interruption: 128+N for signal N,
// as a shell reports it; other cancellations count as SIGTERM.
func InterruptCode(cause error) int {
	var se SignalError
	if errors.As(cause, &se) {
		if s, ok := se.Sig.(syscall.Signal); ok {
			return ExitSignalBase + int(s)
		}
	}
	return ExitSignalBase + int(syscall.SIGTERM)
}

// CancelOnSignal cancels with a SignalError when a signal arrives on
// sigs, until the returned stop function is called.
func CancelOnSignal(sigs <-chan os.Signal, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-sigs:
			cancel(SignalError{s})
		case <-done:
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// CancelOnStopSignals returns ctx, cancelled with a SignalError when one
// of StopSignals arrives, and the function that stops watching for them
// and cancels the context, to be deferred.
func CancelOnStopSignals(ctx context.Context) (context.Context, func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, StopSignals...)
	ctx, cancel := context.WithCancelCause(ctx)
	stopWatch := CancelOnSignal(sigs, cancel)
	return ctx, func() {
		stopWatch()
		cancel(nil)
		signal.Stop(sigs)
	}
}
