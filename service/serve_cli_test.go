package service_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestRunThroughService: "turnstile run --backend turnstile://" holds its
// lock through the service (the command gets the store's token), exits
// 75 with --no-wait while another holds the key, and "turnstile status"
// reads the lock through the service.
func TestRunThroughService(t *testing.T) {
	srv := testserver.StartRedis(t)
	p := startServe(t, "--backend", srv.URL())
	url := "turnstile://" + p.addr
	bin := turnstileCmd.Path(t)
	out, err := exec.Command(bin, "run", "--backend", url, "--key", "cli:job", "--", "sh", "-c", `echo "token $TURNSTILE_TOKEN"`).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "token ") || strings.TrimSpace(string(out)) == "token" {
		t.Fatalf("turnstile run through the service: %v\n%s", err, out)
	}
	held := exec.Command(bin, "run", "--backend", url, "--key", "cli:busy", "--", "sleep", "30")
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Process.Kill(); _ = held.Wait() }()
	if err := pollStatus(t, bin, url, "cli:busy", "is held"); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "--backend", url, "--key", "cli:busy", "--no-wait", "--", "true").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 75 {
		t.Fatalf("turnstile run --no-wait on a held key: %v\n%s; want exit 75", err, out)
	}
}

// pollStatus waits until "turnstile status KEY" says want.
func pollStatus(t *testing.T, bin, url, key, want string) error {
	var out []byte
	for range 200 {
		out, _ = exec.Command(bin, "status", key, "--backend", url).CombinedOutput()
		if strings.Contains(string(out), want) {
			return nil
		}
	}
	return errors.New("turnstile status never said " + want + ": " + string(out))
}
