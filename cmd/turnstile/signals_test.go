//go:build unix

package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A signal that was ignored when turnstile started (nohup, "&" in a
// script) stays ignored for the command too, instead of being caught and
// passed on.
func TestRunKeepsIgnoredSignalsIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"DIR=" + dir, "TURNSTILE=" + binary}
	p := startProcess(t, env, "sh", "-c", `trap '' HUP
exec "$TURNSTILE" run --backend mem:// --key k -- sh -c 'touch "$DIR/ready"; sleep 0.3; touch "$DIR/done"'`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t, 10*time.Second); r.code != 0 {
		t.Errorf("exit code %d, want 0: SIGHUP reached the command; stderr:\n%s", r.code, r.stderr)
	}
	if !exists(filepath.Join(dir, "done")) {
		t.Error("the command did not finish")
	}
}
