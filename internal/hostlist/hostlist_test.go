package hostlist_test

import (
	"slices"
	"testing"

	"github.com/turnstilelock/turnstile/internal/hostlist"
)

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		hosts, emptyHost string
		want             []string
	}{
		{"h1:7000,h2", "localhost", []string{"h1:7000", "h2:6379"}},
		{"", "localhost", []string{"localhost:6379"}},
		{":7000", "localhost", []string{"localhost:7000"}},
		{"[::1]:7000", "", []string{"[::1]:7000"}},
		{"h1,:7000", "localhost", []string{"h1:6379", "localhost:7000"}},
	} {
		got, err := hostlist.Split(tt.hosts, "6379", tt.emptyHost)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tt.hosts, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ hosts, emptyHost string }{
		{"", ""}, {":7000", ""}, {"h1,:7000", ""}, {"h1,,h2", "localhost"}, {"h1,", "localhost"},
		{"h:0", "localhost"}, {"h:65536", "localhost"}, {"h:x", "localhost"}, {"::1", "localhost"},
	} {
		if got, err := hostlist.Split(tt.hosts, "6379", tt.emptyHost); err == nil {
			t.Errorf("Split(%q, empty host %q) = %q, want an error", tt.hosts, tt.emptyHost, got)
		}
	}
}
