package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binary is the turnstile command built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "turnstile-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "turnstile")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		// The processes the tests start are checked for data races too; a
		// race makes one exit 66, which fails the test that ran it.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
			return 1
		}
	}
	return code
}

// dispatched is how a command run in this process ended.
type dispatched struct {
	code           int
	stdout, stderr string
}

// runDispatch runs "turnstile args..." in this process, for two minutes
// at the most.
func runDispatch(t *testing.T, args ...string) dispatched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, args, &stdout, &stderr)
	return dispatched{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// checkUsageError checks that "turnstile args...", run in this process,
// is a usage error whose stderr says want, and returns how it ended.
func checkUsageError(t *testing.T, args []string, want string) dispatched {
	t.Helper()
	r := runDispatch(t, args...)
	if r.code != exitUsage {
		t.Errorf("exit code %d, want %d (usage); stderr:\n%s", r.code, exitUsage, r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	return r
}
