package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	t.Setenv("TURNSTILE_BACKEND", "")
	long := strings.Repeat("k", 513)
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "Usage: turnstile COMMAND"},
		{"unknown command", []string{"lock"}, `unknown command "lock"`},
		{"help for unknown command", []string{"help", "lock"}, `unknown command "lock"`},
		{"run without arguments", []string{"run"}, `missing --key KEY, "--" and the command: turnstile run --key KEY -- COMMAND`},
		{"no dash dash", []string{"run", "--key", "k", "sh", "-c", "true"}, `missing "--" before the command "sh"`},
		{"no command after dash dash", []string{"run", "--key", "k", "--"}, `no command after "--"`},
		{"empty command", []string{"run", "--key", "k", "--", ""}, `no command after "--"`},
		{"no key", []string{"run", "--", "true"}, "--key is required"},
		{"empty key", []string{"run", "--key", "", "--", "true"}, "--key is required"},
		{"huge key", []string{"run", "--key", long, "--", "true"}, "the limit is 512"},
		{"zero ttl", []string{"run", "--key", "k", "--ttl", "0", "--", "true"}, "--ttl 0s is outside"},
		{"negative ttl", []string{"run", "--key", "k", "--ttl", "-1s", "--", "true"}, "--ttl -1s is outside"},
		{"huge ttl", []string{"run", "--key", "k", "--ttl", "25h", "--", "true"}, "--ttl 25h0m0s is outside"},
		{"ttl not a duration", []string{"run", "--key", "k", "--ttl", "abc", "--", "true"}, `invalid value "abc" for flag -ttl: want a duration`},
		{"ttl without unit", []string{"run", "--key", "k", "--ttl", "30", "--", "true"}, "want a duration such as"},
		{"negative lock delay", []string{"run", "--key", "k", "--lock-delay", "-1s", "--", "true"}, "--lock-delay -1s must not be negative"},
		{"huge lock delay", []string{"run", "--key", "k", "--lock-delay", "2h", "--", "true"}, "--lock-delay 2h0m0s is longer than 1h0m0s"},
		{"lock delay not a duration", []string{"run", "--key", "k", "--lock-delay", "x", "--", "true"}, `invalid value "x" for flag -lock-delay`},
		{"lock delay on a kind", []string{"run", "--key", "k", "--lock-delay", "1s", "--shared", "--", "true"}, "--lock-delay applies to the plain lock and --leader, not to --shared"},
		{"zero wait", []string{"run", "--key", "k", "--wait", "0s", "--", "true"}, "--wait 0s must be positive"},
		{"negative wait", []string{"run", "--key", "k", "--wait", "-1s", "--", "true"}, "must be positive"},
		{"wait and no-wait", []string{"run", "--key", "k", "--wait", "1s", "--no-wait", "--", "true"}, "exclude each other"},
		{"negative grace", []string{"run", "--key", "k", "--grace", "-1s", "--", "true"}, "--grace -1s must not be negative"},
		{"unknown flag", []string{"run", "--key", "k", "--bogus", "--", "true"}, "flag provided but not defined: -bogus"},
		{"bad bool", []string{"run", "--key", "k", "--no-wait=maybe", "--", "true"}, "invalid boolean value"},
		{"empty backend", []string{"run", "--backend", "", "--key", "k", "--", "true"}, "--backend must not be empty"},
		{"metrics addr without port", []string{"run", "--key", "k", "--metrics-addr", "localhost", "--", "true"}, "--metrics-addr wants host:port"},
		{"unknown scheme", []string{"run", "--backend", "foo://x", "--key", "k", "--", "true"}, `unknown backend scheme: "foo"`},
		// Not a URL: nothing of it is shown, it may be a secret.
		{"no scheme", []string{"run", "--backend", "127.0.0.1:6379", "--key", "k", "--", "true"}, "--backend is not a URL (14 bytes): want SCHEME://"},
		{"bad redis port", []string{"run", "--backend", "redis://127.0.0.1:99999", "--key", "k", "--", "true"}, "port"},
		{"unknown redis parameter", []string{"run", "--backend", "redis://127.0.0.1:1?colour=red", "--key", "k", "--", "true"}, "unknown query parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := checkUsageError(t, tt.args, tt.want); r.stdout != "" {
				t.Errorf("stdout not empty on a usage error:\n%s", r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in stdout
	}{
		{"help", []string{"help"}, []string{"Commands:", "run "}},
		{"dash h", []string{"-h"}, []string{"Commands:", "run "}},
		{"help run", []string{"help", "run"}, []string{"Usage: turnstile run"}},
		{"run dash h", []string{"run", "-h"}, []string{"Usage: turnstile run"}},
		{"run help after flags", []string{"run", "--key", "k", "--help"}, []string{"Usage: turnstile run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := dispatch(context.Background(), tt.args, &stdout, &stderr); code != exitOK {
				t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout does not contain %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// TestRunHelpDocumentsEverything keeps the hand-written help in step with
// the flags and exit codes in the code.
func TestRunHelpDocumentsEverything(t *testing.T) {
	help := runUsage()
	for _, want := range []string{
		"--backend", "--key", "--ttl", "--lock-delay", "--wait", "--no-wait", "--grace", "--",
		"TURNSTILE_KEY", "TURNSTILE_TOKEN", "TURNSTILE_BACKEND", "redis", "mem",
		"64 ", "69 ", "75 ", "79 ", "126 ", "127 ", "128+N",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("run help does not mention %q", want)
		}
	}
	for _, code := range []int{exitUsage, exitUnavailable, exitNotAcquired, exitLeaseLost, exitCannotRun, exitNotFound} {
		if !strings.Contains(exitCodeHelp, "  "+strconv.Itoa(code)+" ") {
			t.Errorf("exit code table does not list %d", code)
		}
	}
}
