package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// NewFlagSet returns an empty flag set for command name that prints
// nothing itself: the commands print their own usage and errors.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// FlagsDone reports whether err, from reading the arguments of command
// name, ends the command, and with which exit code: for -h
// (flag.ErrHelp) it prints usage on stdout, ExitOK; for another error it
// prints the error, its URLs masked, and the hint to run -h on stderr,
// ExitUsage.
func FlagsDone(name string, err error, usage func() string, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage())
		return ExitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "turnstile %s: %s\nRun \"turnstile %s -h\" for usage.\n", name, Scrub(err.Error()), name)
		return ExitUsage, true
	}
	return ExitOK, false
}
