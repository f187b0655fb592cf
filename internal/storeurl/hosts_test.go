package storeurl_test

import (
	"slices"
	"testing"

	"github.com/turnstilelock/turnstile/internal/storeurl"
)

func TestSplitHosts(t *testing.T) {
	for _, tt := range []struct {
		hosts, emptyHost string
		want             []string
	}{
		{"h1:7000,h2", "localhost", []string{"h1:7000", "h2:6379"}},
		{"", "localhost", []string{"localhost:6379"}},
		{":7000", "localhost", []string{"localhost:7000"}},
		{"[::1]:7000", "", []string{"[::1]:7000"}},
		{"h1,:7000", "localhost", []string{"h1:6379", "localhost:7000"}},
		{"[::1]", "", []string{"[::1]:6379"}},
		{"[::1]:7000,[::2],h3:1", "", []string{"[::1]:7000", "[::2]:6379", "h3:1"}},
		{"[fe80::1%eth0]:1", "", []string{"[fe80::1%eth0]:1"}},
		{"[::ffff:1.2.3.4]:1", "", []string{"[::ffff:1.2.3.4]:1"}},
	} {
		got, err := storeurl.SplitHosts(tt.hosts, "6379", tt.emptyHost)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("SplitHosts(%q) = %q, %v; want %q", tt.hosts, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ hosts, emptyHost string }{
		{"", ""}, {":7000", ""}, {"h1,:7000", ""}, {"h1,,h2", "localhost"}, {"h1,", "localhost"},
		{"h:0", "localhost"}, {"h:65536", "localhost"}, {"h:x", "localhost"}, {"::1", "localhost"},
		{"h:", "localhost"}, {"h1,h2:", "localhost"}, {"[::1]:", "localhost"}, {"[::1", "localhost"},
		{"a]:1", "localhost"}, {"[::1]x", "localhost"}, {"[::1]:7000,[::2", "localhost"}, {"[h]:1", "localhost"},
		{"[1.2.3.4]:5", "localhost"}, {"[]:1", "localhost"}, {"[::1]:0", "localhost"}, {"::1:7000", "localhost"},
	} {
		if got, err := storeurl.SplitHosts(tt.hosts, "6379", tt.emptyHost); err == nil {
			t.Errorf("SplitHosts(%q, empty host %q) = %q, want an error", tt.hosts, tt.emptyHost, got)
		}
	}
}
