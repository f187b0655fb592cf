package main

import (
	"encoding/json"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

var adviseFlags = []string{"rate", "hold", "hot-key-share", "safety", "operation", "stores", "backend", "backend-file", "duration", "json", "help", "h"}

// FuzzParseAdvise: "turnstile advise" flags never panic the parser; a
// refused command line gets an error that names the bad flag or value,
// and an accepted one gives advice with a row of the table, reasons, a
// different runner-up and a preset, as valid JSON.
func FuzzParseAdvise(f *testing.F) {
	for _, s := range [][]string{
		{"--rate", "100k"}, {"--rate", "50"}, {"--rate", "1,500/s", "--hold", "2ms", "--hot-key-share", "5%"},
		{"--rate", "30k", "--safety", "money", "--stores", "redis,postgres,kafka"}, {"--rate", "1e3"},
		{"--rate", "3000", "--stores", "zk,etcd", "--safety", "money"}, {"--rate", "700", "--operation", "payment"},
		{"--rate", "9", "--operation", "stock-decrement", "--stores", "none"}, {"--rate", "0.5", "--hold", "1h"},
		{"--rate", "10", "--backend", "redis://127.0.0.1:6379", "--duration", "1s"}, {"--rate"}, {"--rate", "1M", "--json"},
		{"--rate", "2", "--hot-key-share", "1"}, {"--rate", "2_000_000"}, {"--rate", "1.", "--stores", ","}, {"-h"},
	} {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := clitest.SplitArgs(s)
		in, err := parseAdvise(args)
		if err != nil {
			if in != nil {
				t.Fatalf("parseAdvise(%q) = %+v and %v", args, in, err)
			}
			// flag's "bad flag syntax: ---" names the argument itself.
			quotes := slices.ContainsFunc(args, func(a string) bool { return len(a) > 1 && strings.Contains(err.Error(), a) })
			if !errors.Is(err, flag.ErrHelp) && !quotes && !clitest.NamesBadPart(err.Error(), args, adviseFlags) {
				t.Fatalf("parseAdvise(%q): error %q names no flag or value", args, err)
			}
			return
		}
		if !(in.Rate > 0 && in.Rate <= maxAdviseRate) || in.HotKeyShare < 0 || in.HotKeyShare > 1 || in.hold <= 0 {
			t.Fatalf("parseAdvise(%q) accepted %+v", args, in)
		}
		a := advise(in, documentedCost())
		if _, ok := tableRows[a.Recommendation.Row]; !ok || len(a.Recommendation.Reasons) == 0 {
			t.Fatalf("advise(%q): recommendation %+v", args, a.Recommendation)
		}
		if _, ok := tableRows[a.RunnerUp.Row]; !ok || a.RunnerUp.Row == a.Recommendation.Row || len(a.RunnerUp.Reasons) == 0 {
			t.Fatalf("advise(%q): runner-up %+v beside %s", args, a.RunnerUp, a.Recommendation.Row)
		}
		if a.Preset.URL == "" || a.Preset.Phase < 0 || a.Preset.Phase > 4 || a.Capacity.Source == "" {
			t.Fatalf("advise(%q): preset %+v, capacity %+v", args, a.Preset, a.Capacity)
		}
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("advise(%q): %v", args, err)
		}
	})
}

// FuzzAdviseRate: --rate is a positive number of at most maxAdviseRate,
// or an error; never a panic, NaN or infinity.
func FuzzAdviseRate(f *testing.F) {
	for _, s := range []string{"100", "100k", "1.5M", "20_000", "1,000/s", "0", "-1", "NaN", "Inf", "1e9", "0x1p4", "", "k", "1..2", "999999999999999999999M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseAdviseRate(s)
		if err != nil {
			if v != 0 {
				t.Fatalf("parseAdviseRate(%q) = %v and %v", s, v, err)
			}
			return
		}
		if !(v > 0 && v <= maxAdviseRate) {
			t.Fatalf("parseAdviseRate(%q) = %v", s, v)
		}
	})
}
