package main

import (
	"os"
	"testing"

	"github.com/turnstilelock/turnstile/bench/workload"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The herd workload's worker processes are this test binary again.
	if workload.ServeChild(libraries(true)) {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
