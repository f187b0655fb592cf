//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// "turnstile demo" is the demo package's: its help, its usage errors,
// and no trace of its hidden worker argument in the command list.
func TestDemoCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"help", "demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("help demo: exit code %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "Usage: turnstile demo [SCENARIO...] [flags]") || !strings.Contains(stdout.String(), "flash-sale") {
		t.Errorf("help demo:\n%s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := dispatch(context.Background(), []string{"demo", "--bogus"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("demo --bogus: exit code %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "turnstile demo: flag provided but not defined: -bogus") || stdout.Len() != 0 {
		t.Errorf("demo --bogus: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	stdout.Reset()
	dispatch(context.Background(), []string{"help"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "demo ") || strings.Contains(stdout.String(), "__worker") {
		t.Errorf("command list:\n%s", stdout.String())
	}
}
