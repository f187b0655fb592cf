package proctest

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// JumpDuring moves clock by d while a session of its server is open: it
// runs query (a statement that waits until the server's clock moves, and
// says by how much) in a goroutine of its own, waits until running
// reports that the session runs it (failing the test if it does not
// within 30 s), jumps the clock, and returns what query returned.
func JumpDuring(t testing.TB, clock *proc.Clock, d time.Duration, query func() (string, error), running func() bool) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := query()
		done <- result{out, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !running() {
		if time.Now().After(deadline) {
			t.Fatal("the waiting session never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := clock.Jump(d); err != nil {
		t.Fatal(err)
	}
	r := <-done
	return r.out, r.err
}
