//go:build unix

package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

// These tests call runCmd in this process on the in-process mem://
// backend, as run_inprocess_test.go does, for "turnstile run --leader".

func TestRunLeaderPassesTermAndValue(t *testing.T) {
	code, stdout, stderr := runInProcess(t, context.Background(), "--leader", "leader:reports", "--value", "10.0.0.7:8080", "--",
		"sh", "-c", `printf '%s|%s|%s|%s|%s' "$TURNSTILE_KEY" "$TURNSTILE_TOKEN" "$TURNSTILE_LEADER" "$TURNSTILE_TERM" "$TURNSTILE_VALUE"`)
	if code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	f := strings.Split(stdout, "|")
	if len(f) != 5 {
		t.Fatalf("child printed %q", stdout)
	}
	if f[0] != "leader:reports" || f[2] != "leader:reports" {
		t.Errorf("TURNSTILE_KEY = %q, TURNSTILE_LEADER = %q, want the election's name", f[0], f[2])
	}
	if term, err := strconv.ParseUint(f[3], 10, 64); err != nil || term == 0 {
		t.Errorf("TURNSTILE_TERM = %q, want a positive decimal", f[3])
	}
	if f[1] != f[3] {
		t.Errorf("TURNSTILE_TOKEN = %q and TURNSTILE_TERM = %q: the term is the lease's token", f[1], f[3])
	}
	if f[4] != "10.0.0.7:8080" {
		t.Errorf("TURNSTILE_VALUE = %q, want --value", f[4])
	}
}

func TestRunLeaderDefaultValueAndExitStatus(t *testing.T) {
	code, stdout, stderr := runInProcess(t, context.Background(), "--leader", "e", "--", "sh", "-c", `printf '%s' "$TURNSTILE_VALUE"; exit 7`)
	if code != 7 {
		t.Errorf("exit code %d, want the command's 7; stderr:\n%s", code, stderr)
	}
	host, _ := os.Hostname()
	if want := "-" + strconv.Itoa(os.Getpid()); !strings.HasSuffix(stdout, want) || (host != "" && !strings.Contains(stdout, host)) {
		t.Errorf("TURNSTILE_VALUE = %q, want the host name and process id (%s%s)", stdout, host, want)
	}
}

func TestRunLeaderUsageErrors(t *testing.T) {
	t.Setenv("TURNSTILE_BACKEND", "")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"key and leader", []string{"--key", "k", "--leader", "e", "--", "true"}, "--key and --leader exclude each other"},
		{"leader and fair", []string{"--leader", "e", "--fair", "--", "true"}, "--leader and --fair exclude each other"},
		{"leader and semaphore", []string{"--leader", "e", "--semaphore", "2", "--", "true"}, "--leader and --semaphore"},
		{"empty leader", []string{"--leader", "", "--", "true"}, "--leader must not be empty"},
		{"huge leader", []string{"--leader", strings.Repeat("e", turnstile.MaxKeyLen+1), "--", "true"}, "--leader is 513 bytes long"},
		{"value without leader", []string{"--key", "k", "--value", "v", "--", "true"}, "--value is what observers of an election see: it needs --leader"},
		{"empty value", []string{"--leader", "e", "--value", "", "--", "true"}, "--value must not be empty"},
		{"huge value", []string{"--leader", "e", "--value", strings.Repeat("v", turnstile.MaxLeaderValueLen+1), "--", "true"}, "--value is 129 bytes long, the limit is 128"},
		{"control character", []string{"--leader", "e", "--value", "a\nb", "--", "true"}, `--value "a\nb" contains a control character`},
		{"leader and no-wait and wait", []string{"--leader", "e", "--wait", "1s", "--no-wait", "--", "true"}, "exclude each other"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"run"}, tt.args...), tt.want)
		})
	}
}

func TestRunHelpDocumentsLeader(t *testing.T) {
	help := runUsage()
	for _, want := range []string{"--leader NAME", "--value V", "TURNSTILE_LEADER", "TURNSTILE_TERM", "TURNSTILE_VALUE"} {
		if !strings.Contains(help, want) {
			t.Errorf("run help does not mention %q", want)
		}
	}
}

var runLeaderFlags = append([]string{"leader", "value"}, runFlags...)

// FuzzParseRunLeader: the "turnstile run" parser with --leader and
// --value never panics; a refused command line names the bad flag or
// value, and an accepted one holds the election's name as its key and a
// value Campaign accepts.
func FuzzParseRunLeader(f *testing.F) {
	for _, s := range [][]string{
		{"--leader", "e", "--", "true"}, {"--leader", "e", "--value", "10.0.0.1:80", "--", "x"},
		{"--leader", "e", "--key", "k", "--", "x"}, {"--leader", "", "--", "x"}, {"--value", "v", "--key", "k", "--", "x"},
		{"--leader", "e", "--value", "", "--", "x"}, {"--leader", "e", "--value", "a\x01", "--", "x"},
		{"--leader", "e", "--shared", "--", "x"}, {"--leader", "e", "--no-wait", "--", "x"}, {"--leader=e", "--value=a/b", "--", "x"},
		{},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := clitest.SplitArgs(in)
		o := fuzzParseRun(t, args, runLeaderFlags)
		if o == nil {
			return
		}
		if o.leader == "" {
			if o.value != "" {
				t.Fatalf("parseRun(%q): --value %q accepted without --leader", args, o.value)
			}
			return
		}
		if o.key != o.leader || o.kind != kindPlain {
			t.Fatalf("parseRun(%q): leader %q with key %q, kind %d", args, o.leader, o.key, o.kind)
		}
		if len(o.value) > turnstile.MaxLeaderValueLen || strings.ContainsFunc(o.value, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("parseRun(%q): value %q accepted", args, o.value)
		}
	})
}
