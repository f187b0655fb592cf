package tlstest_test

import (
	"os"
	"testing"

	"github.com/turnstilelock/turnstile/internal/tlstest"
)

func TestQuery(t *testing.T) {
	if got, want := tlstest.Query("ca_file", "/a b/ca.pem", "tls", "on"), "ca_file=%2Fa+b%2Fca.pem&tls=on"; got != want {
		t.Fatalf("Query = %q, want %q", got, want)
	}
}

func TestPasswordFile(t *testing.T) {
	p := tlstest.PasswordFile(t, "pw")
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "pw\n" {
		t.Fatalf("password file holds %q, %v; want \"pw\\n\"", b, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// TestChecks runs the checks against the built-in mem:// backend, which
// takes nothing after the scheme.
func TestChecks(t *testing.T) {
	s := tlstest.Secrets{"hunter2"}
	err := s.InvalidURL(t, "mem://x?password=hunter2", "mem://")
	s.CheckHidden(t, err)
	tlstest.LockOnce(t, "mem://", "k")
	tlstest.EveryCall(t, "mem://", "k")
}
