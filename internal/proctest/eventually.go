package proctest

import (
	"testing"
	"time"
)

// Eventually calls f every 50 ms until it returns nil, and fails the
// test, naming what it waited for and f's last error, when it has not
// within timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
