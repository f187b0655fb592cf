package storeurl_test

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// FuzzSplitHosts: SplitHosts never panics; what it returns is one host:port per
// entry, with a host and a port in [1, 65535], that SplitHosts returns unchanged
// when given again; what it refuses gets an error naming the bad part.
func FuzzSplitHosts(f *testing.F) {
	for _, s := range []string{
		"h1:7000,h2", "", ":7000", "[::1]:7000", "h1,:7000", "h1,,h2", "h1,", "h:0",
		"h:65536", "h:x", "::1", "[::1]", "[fe80::1%25eth0]:1", "[::1]:1,[::2]:2",
		"h:+1", "h:0001", "[h]:1", "[1.2.3.4]:5", "h:", "[]:1", "a]:1", "[::1]:",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, hosts string, localhost bool) {
		emptyHost := ""
		if localhost {
			emptyHost = "localhost"
		}
		addrs, err := storeurl.SplitHosts(hosts, "6379", emptyHost)
		if err != nil {
			if addrs != nil {
				t.Fatalf("SplitHosts(%q) = %q and %v", hosts, addrs, err)
			}
			if !namesPart(err.Error(), hosts) {
				t.Fatalf("SplitHosts(%q): error %q quotes no part of the input", hosts, err)
			}
			return
		}
		if n := strings.Count(hosts, ",") + 1; len(addrs) != n {
			t.Fatalf("SplitHosts(%q) = %q: %d addresses for %d entries", hosts, addrs, len(addrs), n)
		}
		for _, a := range addrs {
			host, port, err := net.SplitHostPort(a)
			if err != nil {
				t.Fatalf("SplitHosts(%q) = %q: %q is no host:port: %v", hosts, addrs, a, err)
			}
			if host == "" || strings.ContainsAny(host, "[],") {
				t.Fatalf("SplitHosts(%q) = %q: bad host %q in %q", hosts, addrs, host, a)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != strings.TrimLeft(port, "0") {
				t.Fatalf("SplitHosts(%q) = %q: bad port %q in %q", hosts, addrs, port, a)
			}
		}
		again, err := storeurl.SplitHosts(strings.Join(addrs, ","), "1", "")
		if err != nil || !slices.Equal(again, addrs) {
			t.Fatalf("SplitHosts(%q) = %q, but SplitHosts of that = %q, %v", hosts, addrs, again, err)
		}
	})
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// namesPart reports whether msg quotes (%q) a part of input.
func namesPart(msg, input string) bool {
	for _, q := range quoted.FindAllString(msg, -1) {
		if s, err := strconv.Unquote(q); err == nil && strings.Contains(input, s) {
			return true
		}
	}
	return false
}
