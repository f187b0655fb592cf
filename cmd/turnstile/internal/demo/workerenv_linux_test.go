//go:build linux

package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// secretPW is the password of the tests here.
const secretPW = "s3cr3tPW"

// showsSecret reports whether out shows secretPW or a piece of it.
func showsSecret(out string) bool {
	return strings.Contains(out, secretPW) || strings.Contains(out, "r3tPW")
}

// The demo's worker processes get the servers' URLs in their
// environment: their command lines, which every local user can read,
// carry no password; and the workers still reach the server that needs
// one.
func TestDemoWorkersKeepPasswordOutOfArgv(t *testing.T) {
	srv := testserver.StartRedis(t)
	if _, err := srv.Do("CONFIG", "SET", "requirepass", secretPW); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "redis-url")
	if err := os.WriteFile(file, []byte("redis://:"+secretPW+"@"+srv.Addr()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDemo(t, "--json", "--backend-file", file, "owner-id")
	seen := 0
	for done := false; !done; {
		select {
		case <-p.done:
			done = true
		case <-time.After(5 * time.Millisecond):
		}
		for _, k := range descendants(p.cmd.Process.Pid) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k), "cmdline"))
			if !bytes.Contains(cmdline, []byte(workerArg)) {
				continue
			}
			seen++
			if bytes.Contains(cmdline, []byte(secretPW)) {
				t.Fatalf("worker %d's command line shows the password: %q", k, cmdline)
			}
		}
	}
	r := p.wait(t, 10*time.Second) // exited already
	if r.code != cli.ExitOK {
		t.Fatalf("demo exited %d; stderr:\n%s", r.code, r.stderr)
	}
	if seen == 0 {
		t.Fatal("saw no worker process")
	}
	if showsSecret(r.stdout+r.stderr) || !strings.Contains(r.stderr, "redis://:xxxxx@"+srv.Addr()+" (given with --backend-file "+file+")") {
		t.Errorf("output shows the password, or does not name the server masked:\n%s%s", r.stdout, r.stderr)
	}
}
