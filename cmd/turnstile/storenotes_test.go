//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// A run on mem:// (which excludes no other process) or on a Redlock of
// one node (one Redis without a quorum) says so on stderr, once; a run
// on a real store or a Redlock of several nodes says nothing.
func TestRunWarnsOfStoresThatCannotExclude(t *testing.T) {
	for _, tc := range []struct {
		backend, want string
	}{
		{"mem://", "turnstile run: warning: mem:// keeps the lock inside this one turnstile process"},
		{"MEM://", "warning: mem://"},
		{"redlock://127.0.0.1:1", "turnstile run: warning: a redlock:// URL with one node is no Redlock"},
		{"redlock://u:p@127.0.0.1:1/0?node_timeout=20ms", "warning: a redlock:// URL with one node"},
		{"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", ""},
		{"redis://127.0.0.1:1", ""},
	} {
		var stderr bytes.Buffer
		runCmd(context.Background(), []string{"--backend", tc.backend, "--key", "k", "--no-wait", "--", "true"}, new(bytes.Buffer), &stderr)
		n := strings.Count(stderr.String(), "warning:")
		switch {
		case tc.want == "" && n != 0:
			t.Errorf("%s: stderr warns:\n%s", tc.backend, stderr.String())
		case tc.want != "" && (n != 1 || !strings.Contains(stderr.String(), tc.want)):
			t.Errorf("%s: stderr does not warn %q once:\n%s", tc.backend, tc.want, stderr.String())
		}
	}
}

// When no flag or variable names the store and the default one fails,
// the message says it was the default.
func TestDefaultStoreFailureSaysSo(t *testing.T) {
	addr := testserver.Raw(t, "") // answers nothing
	old := defaultBackend
	defaultBackend = "redis://" + addr + "/?dial_timeout=300ms"
	t.Cleanup(func() { defaultBackend = old })
	t.Setenv(backendEnv, "")
	want := "no --backend given: tried the default " + defaultBackend
	for _, args := range [][]string{
		{"run", "--key", "k", "--no-wait", "--", "true"},
		{"run", "--key", "k", "--wait", "200ms", "--", "true"},
		{"status", "--timeout", "500ms", "k"},
	} {
		var stderr bytes.Buffer
		code := dispatch(context.Background(), args, new(bytes.Buffer), &stderr)
		if code != exitUnavailable || !strings.Contains(stderr.String(), want) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant %d and %q", args, code, stderr.String(), exitUnavailable, want)
		}
	}
	var stderr bytes.Buffer
	t.Setenv(backendEnv, "redis://"+addr+"/?dial_timeout=300ms")
	if code := dispatch(context.Background(), []string{"status", "--timeout", "500ms", "k"}, new(bytes.Buffer), &stderr); code != exitUnavailable || strings.Contains(stderr.String(), "default") {
		t.Errorf("status with $TURNSTILE_BACKEND: exit %d, stderr:\n%s\nwant %d and no word of the default", code, stderr.String(), exitUnavailable)
	}
}
