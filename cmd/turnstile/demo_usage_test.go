//go:build unix

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDemoUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown scenario", []string{"flash"}, `unknown scenario "flash" (known: flash-sale, double-payment, rider, gc-pause, long-job, owner-id, herd)`},
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"unknown flag after a scenario", []string{"rider", "--fast"}, "flag provided but not defined: -fast"},
		{"flag without value", []string{"--redis"}, "flag needs an argument: -redis"},
		{"empty redis", []string{"--redis", ""}, "--redis must not be empty"},
		{"empty postgres", []string{"--postgres="}, "--postgres must not be empty"},
		{"redis not a url", []string{"--redis", "127.0.0.1:6379"}, `--redis "127.0.0.1:6379": want a URL such as redis://`},
		{"postgres not a url", []string{"--postgres", "host=x"}, `--postgres "host=x": want a URL such as postgres://`},
		{"in-process and redis", []string{"--in-process", "--redis", "redis://127.0.0.1:1"}, "--in-process and --redis exclude each other"},
		{"in-process and postgres", []string{"--postgres", "postgres://x@127.0.0.1/db", "--in-process"}, "--in-process and --postgres exclude each other"},
		{"zero units", []string{"--units", "0"}, "--units 0 is outside [1, 1000000]"},
		{"too many orders", []string{"--orders", "20001"}, "--orders 20001 is outside [1, 20000]"},
		{"orders not a number", []string{"--orders", "many"}, `invalid value "many" for flag -orders`},
		{"bad bool", []string{"--json=maybe"}, "invalid boolean value"},
		{"one waiter", []string{"--waiters", "1"}, "--waiters 1 is outside [2, 20000]"},
		{"metrics addr without port", []string{"--metrics-addr", "9100"}, "--metrics-addr wants host:port"},
		{"worker without spec", []string{demoWorkerArg}, "turnstile demo"},
		{"worker with a bad spec", []string{demoWorkerArg, "{"}, "bad spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), append([]string{"demo"}, tt.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d (usage); stderr:\n%s", code, exitUsage, stderr.String())
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
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"help", "demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	for _, s := range demoScenarios {
		if !strings.Contains(stdout.String(), s.name) {
			t.Errorf("help does not list scenario %s:\n%s", s.name, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), demoWorkerArg) {
		t.Errorf("help shows the internal worker argument:\n%s", stdout.String())
	}
	stdout.Reset()
	dispatch(context.Background(), []string{"help"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "demo") || strings.Contains(stdout.String(), demoWorkerArg) {
		t.Errorf("command list:\n%s", stdout.String())
	}
}
