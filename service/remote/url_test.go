package remote_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/service/remote"
)

func parse(raw string) (remote.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return remote.Config{}, err
	}
	return remote.ParseURL(u)
}

func TestParseURL(t *testing.T) {
	cfg, err := parse("turnstile://orders:s3cret@h1,h2:7071,10.0.0.3:7072?dial_timeout=2s&call_timeout=700ms")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"h1:7070", "h2:7071", "10.0.0.3:7072"}; !slices.Equal(cfg.Hosts, want) {
		t.Errorf("hosts %q, want %q", cfg.Hosts, want)
	}
	if cfg.Token != "orders.s3cret" || cfg.DialTimeout != 2*time.Second || cfg.CallTimeout != 700*time.Millisecond || cfg.TLS != nil {
		t.Errorf("config %+v", cfg)
	}
	for _, c := range []struct{ raw, want string }{
		{"turnstile://", "no host name"},
		{"turnstile://h1,,h2", "is empty"},
		{"turnstile://h1/path", "unexpected path"},
		{"turnstile://:s3cret@h1", "a secret without a token name"},
		{"turnstile://orders@h1", "without its secret"},
		{"turnstile://h1?colour=blue", `unknown query parameter "colour"`},
		{"turnstile://h1?ca_file=/x", "use turnstiles://"},
		{"turnstiles://h1?ca_file=/does/not/exist", "ca_file"},
		{"turnstile://h1?dial_timeout=soon", "dial_timeout"},
		{"turnstile://h1?call_timeout=0s", "call_timeout"},
		{"turnstile://h1#frag", "fragment"},
	} {
		_, err := parse(c.raw)
		if !errors.Is(err, turnstile.ErrInvalidURL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL saying %q", c.raw, err, c.want)
		}
	}
	if _, err := parse("turnstile://orders:hunter2@h1/x"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an error shows the secret: %v", err)
	}
}

// FuzzParseURL: ParseURL never panics; what it refuses matches
// ErrInvalidURL and never shows the URL's secret; what it accepts has
// one host:port per instance and a token of the user information.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"turnstile://h1", "turnstiles://a:b@h1:1,h2?ca_file=x", "turnstile://[::1]:7070,[::2]",
		"turnstile://u:p@h?password_file=/nonexistent", "turnstile://h?dial_timeout=-1s", "redis://h",
		"turnstile://h:99999", "turnstile://a:b@", "turnstile:h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		cfg, err := remote.ParseURL(u)
		if err != nil {
			// A secret that is part of the sentinel's own text masks
			// it too, and errors.Is cannot see through a masked copy
			// (package redact): only then may it fail.
			if !errors.Is(err, turnstile.ErrInvalidURL) && !strings.Contains(err.Error(), redact.Mask) {
				t.Fatalf("ParseURL(%q) = %v, not ErrInvalidURL", raw, err)
			}
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(err.Error(), pw) && !strings.Contains(redact.URL(raw), pw) {
				t.Fatalf("ParseURL(%q): error %q shows the secret", raw, err)
			}
			return
		}
		if len(cfg.Hosts) == 0 || cfg.DialTimeout <= 0 {
			t.Fatalf("ParseURL(%q) = %+v", raw, cfg)
		}
		if name := u.User.Username(); name != "" && !strings.HasPrefix(cfg.Token, name+".") {
			t.Fatalf("ParseURL(%q): token %q is not the user's", raw, cfg.Token)
		}
	})
}
