package testserver

import (
	"bufio"
	"os"
	"os/exec"
	"testing"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// StartChild starts the test binary again, running no test, with env
// (KEY=value) added to its environment, which tells the package's
// TestMain to act as a child process; the child dies with this process,
// and its standard error is this one's. stdout reads what it writes.
// kill kills the child and returns what waiting for it said; if the test
// ends first, the child is killed then.
func StartChild(t testing.TB, env ...string) (stdout *bufio.Reader, kill func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	proc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return bufio.NewReader(out), func() error {
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed = true
		return cmd.Wait()
	}
}
