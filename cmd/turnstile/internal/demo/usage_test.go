//go:build unix

package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

func TestDemoUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown scenario", []string{"flash"}, `unknown scenario "flash" (known: flash-sale, double-payment, rider, gc-pause, long-job, owner-id, herd, coupon, jobs, redlock-outage)`},
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"unknown flag after a scenario", []string{"rider", "--fast"}, "flag provided but not defined: -fast"},
		{"flag without value", []string{"--redis"}, "flag needs an argument: -redis"},
		{"empty redis", []string{"--redis", ""}, "--redis must not be empty"},
		{"empty postgres", []string{"--postgres="}, "--postgres must not be empty"},
		{"redis not a url", []string{"--redis", "127.0.0.1:6379"}, `--redis is not a URL (14 bytes): want a URL such as redis://`},
		{"postgres not a url", []string{"--postgres", "host=x"}, `--postgres is not a URL (6 bytes): want a URL such as postgres://`},
		{"in-process and redis", []string{"--in-process", "--redis", "redis://127.0.0.1:1"}, "--in-process and --redis exclude each other"},
		{"in-process and postgres", []string{"--postgres", "postgres://x@127.0.0.1/db", "--in-process"}, "--in-process and --postgres exclude each other"},
		{"zero units", []string{"--units", "0"}, "--units 0 is outside [1, 1000000]"},
		{"too many orders", []string{"--orders", "20001"}, "--orders 20001 is outside [1, 20000]"},
		{"orders not a number", []string{"--orders", "many"}, `invalid value "many" for flag -orders`},
		{"bad bool", []string{"--json=maybe"}, "invalid boolean value"},
		{"one waiter", []string{"--waiters", "1"}, "--waiters 1 is outside [2, 20000]"},
		{"outage ttl too short", []string{"redlock-outage", "--outage-ttl", "100ms"}, "--outage-ttl 100ms is outside [200ms, 10s]"},
		{"outage ttl not a duration", []string{"--outage-ttl", "1"}, `invalid value "1" for flag -outage-ttl`},
		{"outage phase too long", []string{"--outage-phase", "2h"}, "--outage-phase 2h0m0s is outside [50ms, 1h0m0s]"},
		{"metrics addr without port", []string{"--metrics-addr", "9100"}, "--metrics-addr wants host:port"},
		{"worker without spec", []string{workerArg}, "turnstile demo"},
		{"worker with a bad spec", []string{workerArg, "{"}, "bad spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tt.args, &stdout, &stderr)
			if code != cli.ExitUsage {
				t.Errorf("exit code %d, want %d (usage); stderr:\n%s", code, cli.ExitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr does not contain %q:\n%s", tt.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
		})
	}
}

func TestDemoHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), []string{arg}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%s: exit code %d; stderr:\n%s", arg, code, stderr.String())
		}
		for _, s := range scenarios {
			if !strings.Contains(stdout.String(), s.name) {
				t.Errorf("%s: help does not list scenario %s:\n%s", arg, s.name, stdout.String())
			}
		}
		if strings.Contains(stdout.String(), workerArg) {
			t.Errorf("%s: help shows the internal worker argument:\n%s", arg, stdout.String())
		}
	}
}

// --redis and --postgres come from a flag, a file or, for Redis,
// $TURNSTILE_BACKEND, which --in-process makes the demo ignore.
func TestDemoBackendSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "url")
	pg := filepath.Join(dir, "pg")
	if err := os.WriteFile(file, []byte("redis://127.0.0.1:7001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pg, []byte("postgres://u:pw@127.0.0.1/db"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := parseArgs([]string{"--backend-file", file, "rider"}); err != nil || o.redisURL != "redis://127.0.0.1:7001" || o.redisFrom != "--backend-file "+file {
		t.Errorf("--backend-file: %+v, %v", o, err)
	}
	if o, err := parseArgs([]string{"--postgres-file", pg, "rider"}); err != nil || o.pgURL != "postgres://u:pw@127.0.0.1/db" || o.pgFrom != "--postgres-file "+pg {
		t.Errorf("--postgres-file: %+v, %v", o, err)
	}
	t.Setenv(cli.BackendEnv, "redis://127.0.0.1:7002")
	if o, err := parseArgs([]string{"rider"}); err != nil || o.redisURL != "redis://127.0.0.1:7002" || o.redisFrom != "$TURNSTILE_BACKEND" {
		t.Errorf("$TURNSTILE_BACKEND: %+v, %v", o, err)
	}
	if o, err := parseArgs([]string{"--in-process", "rider"}); err != nil || o.redisURL != "" {
		t.Errorf("--in-process with $TURNSTILE_BACKEND: %+v, %v", o, err)
	}
}
