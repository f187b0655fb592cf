package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// errNumberSyntax is a number the advise flags do not read.
var errNumberSyntax = errors.New("not a number as advise reads them")

// parseAdviseNumber reads a number of the advise flags: digits with an
// optional fraction (1500, 0.05), grouped if you like in one of two
// ways: Go-style underscores, one between any two digits (20_000, 1_0,
// 0.000_5), or commas between groups of three in the whole part (1,500).
// Nothing else: no sign, exponent, hex, spaces, or a point without digits
// on both sides. The two groupings are not mixed.
func parseAdviseNumber(s string) (float64, error) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if hasFrac && !goDigits(frac) {
		return 0, errNumberSyntax
	}
	if !goDigits(whole) && !(commaDigits(whole) && !strings.Contains(frac, "_")) {
		return 0, errNumberSyntax
	}
	v, err := strconv.ParseFloat(strings.NewReplacer("_", "", ",", "").Replace(s), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, errNumberSyntax
	}
	return v, nil
}

// goDigits reports whether s is digits with single underscores between
// them, as in a Go literal.
func goDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
		case s[i] == '_' && i > 0 && i < len(s)-1 && isDigit(s[i-1]) && isDigit(s[i+1]):
		default:
			return false
		}
	}
	return true
}

// commaDigits reports whether s is digits grouped by three with commas:
// 1,500 or 12,345,678, not 1,5.
func commaDigits(s string) bool {
	groups := strings.Split(s, ",")
	if len(groups) < 2 || len(groups[0]) < 1 || len(groups[0]) > 3 {
		return false
	}
	for i, g := range groups {
		if i > 0 && len(g) != 3 {
			return false
		}
		for j := 0; j < len(g); j++ {
			if !isDigit(g[j]) {
				return false
			}
		}
	}
	return true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// adviseDuration is a duration flag of advise: a Go duration (200ms,
// 1h30m), whose digits may be grouped by Go-style underscores as the
// other numbers of advise (1_500ms).
type adviseDuration time.Duration

func (d *adviseDuration) String() string { return time.Duration(*d).String() }

func (d *adviseDuration) Set(s string) error {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' {
			if i == 0 || i == len(s)-1 || !isDigit(s[i-1]) || !isDigit(s[i+1]) {
				return errors.New("want a duration such as 500ms, 30s or 5m (an underscore only between two digits)")
			}
			continue
		}
		b.WriteByte(s[i])
	}
	v, err := time.ParseDuration(b.String())
	if err != nil {
		return errors.New("want a duration such as 500ms, 30s or 5m")
	}
	*d = adviseDuration(v)
	return nil
}
