package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/clitest"
)

var adviseFlags = []string{"rate", "hold", "hot-key-share", "safety", "operation", "stores", "backend", "backend-file", "duration", "json", "help", "h"}

// FuzzParseAdvise: "turnstile advise" flags never panic the parser; a
// refused command line gets an error that names the bad flag or value,
// and an accepted one gives advice that fits what it sizes and agrees
// with itself (checkAdvice).
func FuzzParseAdvise(f *testing.F) {
	for _, s := range [][]string{
		{"--rate", "100k"}, {"--rate", "50"}, {"--rate", "1,500/s", "--hold", "2ms", "--hot-key-share", "5%"},
		{"--rate", "30k", "--safety", "money", "--stores", "redis,postgres,kafka"}, {"--rate", "1e3"},
		{"--rate", "3000", "--stores", "zk,etcd", "--safety", "money"}, {"--rate", "700", "--operation", "payment"},
		{"--rate", "9", "--operation", "stock-decrement", "--stores", "none"}, {"--rate", "0.5", "--hold", "1h"},
		{"--rate", "10", "--backend", "redis://127.0.0.1:6379", "--duration", "1s"}, {"--rate"}, {"--rate", "1M", "--json"},
		{"--rate", "2", "--hot-key-share", "1"}, {"--rate", "2_000_000"}, {"--rate", "1.", "--stores", ","}, {"-h"},
		{"--rate", "1_0", "--hold", "1_500ms", "--hot-key-share", "0.000_5"}, {"--rate", "5", "--hold", "1h", "--hot-key-share", "100%"},
		{"--rate", "200k", "--operation", "stock-decrement", "--hot-key-share", "40%"}, {"--rate", "1000M", "--operation", "payment", "--hold", "20s"},
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
		c := documentedCost()
		checkAdvice(t, fmt.Sprintf("%q", args), in, c, advise(in, c))
	})
}

// FuzzAdviseRate: --rate is a positive number of at most maxAdviseRate,
// or an error; never a panic, NaN or infinity.
func FuzzAdviseRate(f *testing.F) {
	for _, s := range []string{"100", "100k", "1.5M", "20_000", "1_0", "1,000/s", "0", "-1", "NaN", "Inf", "1e9", "0x1p4", "", "k", "1..2", "999999999999999999999M"} {
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
		if !(v >= minAdviseRate && v <= maxAdviseRate) {
			t.Fatalf("parseAdviseRate(%q) = %v", s, v)
		}
	})
}

// FuzzAdviseNumber: the number syntax of every advise flag. An accepted
// number is its digits without separators; its underscores sit each
// between two digits and its commas group the whole part by three, never
// both; and putting an underscore between two more digits keeps it the
// same number.
func FuzzAdviseNumber(f *testing.F) {
	for _, s := range []string{"0", "1_0", "20_000", "1,500", "1,000,000.25", "0.000_5", "1__0", "_1", "1_", "1,5", "1_,000", "1,000_000",
		"1.", ".5", "1e5", "0x10", "+1", "-1", "1.2.3", "٣", "99999999999999999999999999999999999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseAdviseNumber(s)
		if err != nil {
			if v != 0 || !errors.Is(err, errNumberSyntax) {
				t.Fatalf("parseAdviseNumber(%q) = %v, %v", s, v, err)
			}
			return
		}
		plain := strings.NewReplacer("_", "", ",", "").Replace(s)
		want, perr := strconv.ParseFloat(plain, 64)
		if perr != nil || v != want || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("parseAdviseNumber(%q) = %v; its digits %q read %v, %v", s, v, plain, want, perr)
		}
		if strings.Trim(plain, "0123456789.") != "" || strings.Count(plain, ".") > 1 || strings.HasPrefix(plain, ".") || strings.HasSuffix(plain, ".") {
			t.Fatalf("parseAdviseNumber(%q) accepted %q", s, plain)
		}
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] == '_' && (i == 0 || i == len(s)-1 || !isDigit(s[i-1]) || !isDigit(s[i+1])):
				t.Fatalf("parseAdviseNumber(%q) accepted an underscore not between digits", s)
			case s[i] == ',' && strings.Contains(s, "_"):
				t.Fatalf("parseAdviseNumber(%q) accepted commas and underscores together", s)
			}
		}
		if strings.Contains(s, ",") {
			return
		}
		for i := 1; i < len(s); i++ {
			if isDigit(s[i-1]) && isDigit(s[i]) {
				if w, err := parseAdviseNumber(s[:i] + "_" + s[i:]); err != nil || w != v {
					t.Fatalf("parseAdviseNumber(%q) = %v, but with an underscore at %d: %v, %v", s, v, i, w, err)
				}
				break
			}
		}
	})
}
