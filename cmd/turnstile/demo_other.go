//go:build !unix

package main

import (
	"context"
	"fmt"
	"io"
)

// demoCmd implements "turnstile demo", which needs Unix: its scenarios
// stop and resume worker processes with SIGSTOP and SIGCONT and start
// redis-server and PostgreSQL as child processes.
func demoCmd(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turnstile demo: runs on Linux and other Unix systems only (it stops and resumes worker processes with SIGSTOP and SIGCONT)")
	return exitUnavailable
}
