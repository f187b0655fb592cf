package workload_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// The errors of NewCounter never show a password, however the URL is
// mistyped: in an opaque form, with an unescaped '#' or '/' in it, or
// where rueidis repeats the URL it could not read.
func TestNewCounterRedacts(t *testing.T) {
	for _, addr := range []string{
		"redis://:s3cr3tPW@127.0.0.1:6379/x",
		"redis://u:s3cr3tPW@127.0.0.1:6379/?password=s3cr3tPW",
		"redis://u:s3cr3tPW@127.0.0.1:notaport",
		"redis://u:s3c#r3tPW@127.0.0.1:6379",
		"redis://u:s3c/r3tPW@127.0.0.1:6379",
		"http://u:s3cr3tPW@127.0.0.1:6379",
		"redis://u:s3cr3tPW@127.0.0.1:6379?protocol=9",
	} {
		c, err := workload.NewCounter([]string{addr})
		if err == nil {
			c.Close()
			continue // rueidis connects lazily to some of them: nothing to show
		}
		if msg := err.Error(); strings.Contains(msg, "s3cr3tPW") || strings.Contains(msg, "r3tPW") || strings.Contains(msg, "s3c") {
			t.Errorf("NewCounter(%q) = %q: shows the password", addr, msg)
		}
		if !errors.Is(err, workload.ErrUsage) && !strings.Contains(err.Error(), "connect to") {
			t.Errorf("NewCounter(%q) = %v: neither a usage error nor a connection error", addr, err)
		}
	}
}
