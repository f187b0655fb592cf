package main

import (
	"os"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestMain is also the workload process: the runner starts this test
// binary with the worker's configuration in the environment.
func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(runWorker(cfg))
	}
	testserver.Main(m)
}
