//go:build !unix

package demo

import (
	"context"
	"fmt"
	"io"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// Main implements "turnstile demo", which needs Unix: its scenarios
// stop and resume worker processes with SIGSTOP and SIGCONT and start
// redis-server and PostgreSQL as child processes. Elsewhere it says so
// and returns 69.
func Main(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turnstile demo: runs on Linux and other Unix systems only (it stops and resumes worker processes with SIGSTOP and SIGCONT)")
	return cli.ExitUnavailable
}
