//go:build unix

package demo

import (
	"errors"
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

var demoFlags = []string{"json", "redis", "postgres", "in-process", "units", "orders", "waiters", "metrics-addr", "help", "h"}

// FuzzParseArgs: "turnstile demo" flags never panic the parser; a
// refused command line gets an error that names the bad flag or value, and
// an accepted one, written back as flags, parses to the same options. The
// scenario names may come before, between or after the flags.
func FuzzParseArgs(f *testing.F) {
	for _, s := range [][]string{
		{}, {"flash-sale", "--json", "herd"}, {"--in-process", "--units", "5", "--orders", "7", "--waiters", "100", "rider"},
		{"--redis", "redis://127.0.0.1:6379", "--postgres", "postgres://u@h/db"}, {"--redis", ""}, {"--redis", "http://x"},
		{"--in-process", "--redis", "redis://h"}, {"--units", "0"}, {"--orders", "x"}, {"--waiters", "1"}, {"nope"},
		{"--", "--json"}, {"herd", "herd"}, {"--metrics-addr", "x"}, {"--postgres", "mysql://x"}, {"-units=-1"},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := clitest.SplitArgs(in)
		if len(args) > 0 && args[0] == workerArg {
			return // the scenarios' worker processes, not a user's command line
		}
		o, err := parseArgs(args)
		if err != nil {
			if o != nil {
				t.Fatalf("parseArgs(%q) = %+v and %v", args, o, err)
			}
			if !errors.Is(err, flag.ErrHelp) && !clitest.NamesBadPart(err.Error(), args, demoFlags) {
				t.Fatalf("parseArgs(%q): error %q names no flag or value", args, err)
			}
			return
		}
		var names []string
		for _, s := range o.scenarios {
			names = append(names, s.name)
		}
		if len(names) == 0 {
			t.Fatalf("parseArgs(%q): no scenarios", args)
		}
		back := []string{"--units", strconv.FormatInt(o.units, 10), "--orders", strconv.Itoa(o.orders),
			"--waiters", strconv.Itoa(o.waiters), "--metrics-addr", o.metricsAddr}
		if o.json {
			back = append(back, "--json")
		}
		if o.inProcess {
			back = append(back, "--in-process")
		}
		if o.redisURL != "" {
			back = append(back, "--redis", o.redisURL)
		}
		if o.pgURL != "" {
			back = append(back, "--postgres", o.pgURL)
		}
		back = append(append(back, "--"), names...)
		o2, err := parseArgs(back)
		if err != nil {
			t.Fatalf("parseArgs(%q) accepted options that, written back as %q, it refuses: %v", args, back, err)
		}
		var names2 []string
		for _, s := range o2.scenarios {
			names2 = append(names2, s.name)
		}
		if !slices.Equal(names, names2) || o.units != o2.units || o.orders != o2.orders || o.waiters != o2.waiters ||
			o.json != o2.json || o.inProcess != o2.inProcess || o.redisURL != o2.redisURL || o.pgURL != o2.pgURL ||
			o.metricsAddr != o2.metricsAddr {
			t.Fatalf("parseArgs(%q) = %+v, but written back as %q: %+v", args, o, back, o2)
		}
	})
}
