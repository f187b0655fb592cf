//go:build unix

package main

import (
	"errors"
	"flag"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

// fuzzParseRun parses args as run does and returns the options, or nil
// for a refused command line, whose error must name one of its flags
// (of known) or values, or ask for help.
func fuzzParseRun(t *testing.T, args, known []string) *runOptions {
	t.Helper()
	o, err := parseRun(args)
	if err == nil {
		return o
	}
	if o != nil {
		t.Fatalf("parseRun(%q) = %+v and %v", args, o, err)
	}
	if !errors.Is(err, flag.ErrHelp) && !clitest.NamesBadPart(err.Error(), args, known) {
		t.Fatalf("parseRun(%q): error %q names no flag or value", args, err)
	}
	return nil
}

var runFlags = []string{"backend", "backend-file", "key", "ttl", "wait", "no-wait", "grace", "metrics-addr", "shared", "exclusive", "semaphore", "fair", "pass-backend", "help", "h"}

// FuzzParseRun: "turnstile run" flags never panic the parser; a refused
// command line gets an error that names the bad flag or value, and an
// accepted one, written back as flags, parses to the same options.
func FuzzParseRun(f *testing.F) {
	for _, s := range [][]string{
		{"--key", "k", "--", "true"},
		{"--key", "k", "--ttl", "1s", "--wait", "5s", "--grace", "0s", "--metrics-addr", "127.0.0.1:0", "--backend", "mem://", "--", "sh", "-c", "x"},
		{"--key", "k", "--no-wait", "--wait", "1s", "--", "x"},
		{"--key", "k", "true"}, {"--key", "", "--", "x"}, {"--ttl", "x"}, {"--key", "k", "--ttl", "1ns", "--", "x"},
		{"--key", "k", "--wait", "0s", "--", "x"}, {"--key", "k", "--grace", "-1s", "--", "x"}, {"--key"},
		{"--key", "k", "--", ""}, {"--bogus"}, {"--key", "k", "--metrics-addr", "nope", "--", "x"}, {"-h"},
		{"--key", "k", "--backend", "", "--", "x"}, {"--key", strings.Repeat("k", 513), "--", "x"}, {"---key", "k"},
		{"--key", "k", "--ttl", "9999999h", "--", "x"}, {"--key", "k", "--no-wait=maybe", "--", "x"}, {"--", "x"},
		{"--key", "k", "--shared", "--", "x"}, {"--key", "k", "--semaphore", "3", "--", "x"}, {"--key", "k", "--fair", "--exclusive", "--", "x"},
		{"--key", "k", "--semaphore", "0", "--", "x"}, {"--key", "k", "--fair=false", "--shared", "--", "x"},
		{}, {"--key", "k", "redis://u:p@h/?pasword=x", "--", "x"}, {"--key", "k", "--pass-backend", "--", "x"}, {"-="},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := clitest.SplitArgs(in)
		o := fuzzParseRun(t, args, runFlags)
		if o == nil {
			return
		}
		if len(o.argv) == 0 || o.argv[0] == "" || !slices.Equal(o.argv, args[len(args)-len(o.argv):]) || args[len(args)-len(o.argv)-1] != "--" {
			t.Fatalf("parseRun(%q): command %q is not what follows \"--\"", args, o.argv)
		}
		back := []string{"--backend", o.backend, "--key", o.key, "--ttl", o.ttl.String(), "--grace", o.grace.String(), "--metrics-addr", o.metricsAddr}
		if o.noWait {
			back = append(back, "--no-wait")
		}
		if o.wait != 0 {
			back = append(back, "--wait", o.wait.String())
		}
		switch o.kind {
		case kindPlain:
		case kindSemaphore:
			back = append(back, "--semaphore", strconv.Itoa(o.permits))
		default:
			back = append(back, "--"+kindFlags[o.kind-1])
		}
		back = append(append(back, "--"), o.argv...)
		o2, err := parseRun(back)
		if err != nil {
			t.Fatalf("parseRun(%q) accepted options that, written back as %q, it refuses: %v", args, back, err)
		}
		if o.backend != o2.backend || o.key != o2.key || o.ttl != o2.ttl || o.wait != o2.wait || o.noWait != o2.noWait ||
			o.grace != o2.grace || o.metricsAddr != o2.metricsAddr || !slices.Equal(o.argv, o2.argv) ||
			o.kind != o2.kind || o.permits != o2.permits {
			t.Fatalf("parseRun(%q) = %+v, but written back as %q: %+v", args, o, back, o2)
		}
	})
}

var benchFlags = []string{"url", "only", "duration", "waiters", "hold", "json", "html", "help", "h"}

// FuzzParseBench: the same for "turnstile bench": its --url is checked
// without connecting, and --only must select a workload.
func FuzzParseBench(f *testing.F) {
	for _, s := range [][]string{
		{}, {"--url", "redis://127.0.0.1:6379", "--only", "uncontended", "--duration", "1s", "--waiters", "10", "--hold", "2ms", "--json"},
		{"--url", "redlock://h1:1,h2:2", "--only", "redlock"}, {"--url", "redis://h", "--only", "redlock"},
		{"--url", "redlock://[::1]:1"}, {"--url", ""}, {"--url", "http://x"}, {"--url", "redis://[::1"},
		{"--only", "("}, {"--only", "nothing"}, {"--duration", "0s"}, {"--waiters", "1"}, {"--waiters", "x"},
		{"--hold", "2s"}, {"--html", ""}, {"--html", "/nonexistent/dir/r.html"}, {"extra"}, {"--json=x"},
		{"--url", "redis://u:secret@h:0"}, {"--url", "redis:opaque"}, {"--url", "redlock://a]:1"},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := clitest.SplitArgs(in)
		o, err := parseBench(args)
		if err != nil {
			if o != nil {
				t.Fatalf("parseBench(%q) = %+v and %v", args, o, err)
			}
			if !errors.Is(err, flag.ErrHelp) && !clitest.NamesBadPart(err.Error(), args, benchFlags) {
				t.Fatalf("parseBench(%q): error %q names no flag or value", args, err)
			}
			return
		}
		if len(o.cells) == 0 {
			t.Fatalf("parseBench(%q): no cells", args)
		}
		var ids []string
		for _, c := range o.cells {
			ids = append(ids, regexp.QuoteMeta(c.workload.ID()))
		}
		back := []string{"--duration", o.duration.String(), "--waiters", strconv.Itoa(o.waiters), "--hold", o.hold.String(),
			"--only", "^(" + strings.Join(ids, "|") + ")$"}
		if o.url != "" {
			back = append(back, "--url", o.url)
		}
		if o.json {
			back = append(back, "--json")
		}
		if o.html != "" {
			back = append(back, "--html", o.html)
		}
		o2, err := parseBench(back)
		if err != nil {
			t.Fatalf("parseBench(%q) accepted options that, written back as %q, it refuses: %v", args, back, err)
		}
		if o.url != o2.url || o.duration != o2.duration || o.waiters != o2.waiters || o.hold != o2.hold || o.json != o2.json ||
			o.html != o2.html || !slices.Equal(o.cells, o2.cells) {
			t.Fatalf("parseBench(%q) = %+v, but written back as %q: %+v", args, o, back, o2)
		}
	})
}
