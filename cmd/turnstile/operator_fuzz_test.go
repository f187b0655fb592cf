//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

// FuzzOperatorCommands: status, ls and unlock never panic on any command
// line; they answer (exit 0 or 1) or refuse with exit 64, one line and
// the hint, and nothing on stdout. The store is the in-process memory
// store: command lines naming another are skipped.
func FuzzOperatorCommands(f *testing.F) {
	for _, s := range [][]string{
		{"status", "k"}, {"status", "k", "--json"}, {"status", "--held", "k"}, {"status"}, {"status", ""},
		{"status", "a", "b"}, {"status", "k", "--", "--json"}, {"ls"}, {"ls", "--limit", "0"}, {"ls", "--prefix", "x", "--json"},
		{"ls", "--limit", "-1"}, {"ls", "extra"}, {"unlock", "k"}, {"unlock", "k", "--force", "--yes"}, {"unlock", "--force"},
		{"unlock", "k", "--force"}, {"status", "-h"}, {"ls", "--bogus"}, {"unlock", "k", "--yes=maybe"},
		{"status", "k", "--kind", "semaphore"}, {"status", "k", "--kind", "fair", "--json"}, {"ls", "--kind", "shared"},
		{"ls", "--kind", "mutex"}, {"unlock", "k", "--force", "--yes", "--kind", "reentrant"}, {"status", "--kind=", "k"},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := clitest.SplitArgs(in)
		if len(args) == 0 || strings.Contains(in, "backend") || strings.Contains(in, "timeout") {
			return
		}
		switch args[0] {
		case "status", "ls", "unlock":
		default:
			return
		}
		t.Setenv("TURNSTILE_BACKEND", "mem://")
		defer func(f func() bool) { stdinIsTerminal = f }(stdinIsTerminal)
		stdinIsTerminal = func() bool { return false }
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), args, &stdout, &stderr)
		switch code {
		case exitOK, exitFree:
		case exitUsage:
			if stdout.Len() != 0 {
				t.Errorf("%q: stdout on a usage error: %q", args, stdout.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "turnstile "+args[0]+": ") {
				t.Errorf("%q: usage error is not one line and the hint:\n%s", args, stderr.String())
			}
		default:
			t.Errorf("%q: exit %d; stderr:\n%s", args, code, stderr.String())
		}
	})
}
