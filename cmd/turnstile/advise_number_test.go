package main

import (
	"testing"
	"time"
)

// --rate reads the ways people write a rate, and nothing ambiguous:
// Go-style underscores between any two digits, or commas between groups
// of three.
func TestAdviseRateSyntax(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{
		"800": 800, "20000": 20000, "20_000": 20000, "1_0": 10, "2_0_0_0_0": 20000, "1_000_000": 1e6, "0.000_5k": 0.5,
		"1,500": 1500, "1,000,000": 1e6, "1,000.5": 1000.5, "100k": 1e5, "100K/s": 1e5, "1_5.2_5M": 15.25e6,
		"1.5M": 1.5e6, "0.5": 0.5, " 42 ": 42, "2500/s": 2500,
	} {
		if got, err := parseAdviseRate(in); err != nil || got != want {
			t.Errorf("parseAdviseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1,5", "1,50", "12,34,567", "_10", "10_", "1__0", "1_,000", "1,000_000", "1,000.0_5", "1_.5", "1._5",
		"1e5", "0x10", "0x1p4", "1.", ".5", "+5", "-5", "5 k", "5kk", "5/min", "1,000.5.5", "1m", "NaN", "Inf", "١٢"} {
		if got, err := parseAdviseRate(in); err == nil {
			t.Errorf("parseAdviseRate(%q) = %v, want an error", in, got)
		}
	}
	// Shares and durations read digits the same way.
	if v, err := parseAdviseShare("0.000_5"); err != nil || v != 0.0005 {
		t.Errorf("parseAdviseShare(0.000_5) = %v, %v", v, err)
	}
	if v, err := parseAdviseShare("1_0%"); err != nil || v != 0.1 {
		t.Errorf("parseAdviseShare(1_0%%) = %v, %v", v, err)
	}
	var d adviseDuration
	if err := d.Set("1_500ms"); err != nil || time.Duration(d) != 1500*time.Millisecond {
		t.Errorf("--hold 1_500ms = %v, %v", time.Duration(d), err)
	}
	for _, bad := range []string{"_1s", "1_s", "1__0s", "1s_"} {
		if err := d.Set(bad); err == nil {
			t.Errorf("--hold %s accepted", bad)
		}
	}
}
