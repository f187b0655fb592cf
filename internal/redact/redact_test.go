package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"redis://:s3cr3tPW@127.0.0.1:1", "redis://:xxxxx@127.0.0.1:1"},
		{"redis://default:s3cr3tPW@h:1/2?prefix=a", "redis://default:xxxxx@h:1/2?prefix=a"},
		{"redis:default:s3cr3tPW@127.0.0.1:16380", "redis:xxxxx@127.0.0.1:16380"},
		{"redis:s3cr3tPW@127.0.0.1:16380", "redis:xxxxx@127.0.0.1:16380"},
		{"//:s3cr3tPW@127.0.0.1:16380", "//:xxxxx@127.0.0.1:16380"},
		{"default:s3cr3tPW@127.0.0.1", "default:xxxxx@127.0.0.1"},
		{"postgres://h/db?password=s3cr3tPW", "postgres://h/db?password=xxxxx"},
		{"postgres://h/db?sslmode=disable&sslpassword=s3cr3tPW&application_name=x", "postgres://h/db?sslmode=disable&sslpassword=xxxxx&application_name=x"},
		{"postgres://h/db?PassWord=s3cr3tPW", "postgres://h/db?PassWord=xxxxx"},
		{"postgres://h/db?pass%77ord=s3cr3tPW", "postgres://h/db?pass%77ord=xxxxx"},
		{"redis://h#token=s3cr3tPW", "redis://h#token=xxxxx"},
		{"redis://u:s3c/r3tPW@h", "redis://u:xxxxx@h"},
		{"redis://u:s3c#r3tPW@h", "redis://u:xxxxx@h"},
		{"redis://u:s3c?r3tPW@h", "redis://u:xxxxx@h"},
		{"redis://u:a@b@h", "redis://u:xxxxx@h"},
		{"postgres://u@h/db?application_name=me@x", "postgres://u@h/db?application_name=me@x"},
		{"", ""},
		{"not a url", "not a url"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	raw := "redis://u:s3c%2Fr3tPW@h?password=an0therPW"
	base := errors.New("base")
	err := Error(fmt.Errorf("%w: dial %s as s3c/r3tPW and s3c%%2Fr3tPW, then an0therPW", base, raw), raw)
	msg := err.Error()
	for _, s := range []string{"s3c/r3tPW", "s3c%2Fr3tPW", "an0therPW"} {
		if strings.Contains(msg, s) {
			t.Errorf("message %q contains %q", msg, s)
		}
	}
	if !errors.Is(err, base) {
		t.Errorf("errors.Is(%v, base) = false", err)
	}
	if !strings.Contains(msg, "@h") {
		t.Errorf("message %q lost the host", msg)
	}
	if Error(nil, raw) != nil {
		t.Error("Error(nil) != nil")
	}
	plain := errors.New("no secret here")
	if Error(plain, raw) != plain {
		t.Error("an error without secrets was wrapped")
	}
}

func TestErrorPieces(t *testing.T) {
	// url.Parse cuts "abcdef#ghijkl" at '#' and complains about the
	// first piece as a port.
	raw := "redis://u:abcdef#ghijkl@h"
	err := Error(errors.New(`invalid port ":abcdef" after host; fragment ghijkl@h`), raw)
	for _, s := range []string{"abcdef", "ghijkl"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%q contains %q", err, s)
		}
	}
}

func TestStringShortSecrets(t *testing.T) {
	if got := String("dial 127.0.0.1:6379", "1", "12"); got != "dial 127.0.0.1:6379" {
		t.Errorf("short secrets scrubbed: %q", got)
	}
	if got := String("a abcd abc", "abc", "abcd"); got != "a xxxxx xxxxx" {
		t.Errorf("got %q", got)
	}
}

// secretError is a driver error that repeats the password.
type secretError struct{ pw string }

func (e *secretError) Error() string { return "auth failed with " + e.pw }

func TestErrorChainMasked(t *testing.T) {
	raw := "redis://:s3cr3tPW@h"
	sentinel := errors.New("sentinel")
	driverErr := &secretError{"s3cr3tPW"}
	err := Error(fmt.Errorf("open: %w", errors.Join(sentinel, fmt.Errorf("dial: %w", driverErr))), raw)
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(err, sentinel) = false")
	}
	var se *secretError
	if errors.As(err, &se) {
		t.Errorf("errors.As found the unmasked driver error %q", se)
	}
	if u := errors.Unwrap(err); u != nil {
		t.Errorf("errors.Unwrap = %q, want nil", u)
	}
	// Walk the whole tree: nothing in it shows the secret.
	var walk func(error)
	walk = func(e error) {
		if strings.Contains(e.Error(), "s3cr3tPW") {
			t.Errorf("%q in the chain shows the secret", e)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				walk(w)
			}
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				walk(w)
			}
		}
	}
	walk(err)
}

// TestURLNested: a query value that is itself a URL, as the stores of a
// fallback:// URL are, has its secrets masked, percent-encoded or not.
func TestURLNested(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fallback://?primary=redis%3A%2F%2F%3As3cr3tPW%40h%3A6379&secondary=postgres%3A%2F%2Fu%3Aan0therPW%40db%2Fl",
			"fallback://?primary=redis%3A%2F%2F%3Axxxxx%40h%3A6379&secondary=postgres%3A%2F%2Fu%3Axxxxx%40db%2Fl"},
		{"fallback://?primary=redis://127.0.0.1:6379&secondary=postgres://u@db/l?sslmode=disable",
			"fallback://?primary=redis://127.0.0.1:6379&secondary=postgres://u@db/l?sslmode=disable"},
		{"fallback://?primary=redis://h:1&secondary=postgres%3A%2F%2Fdb%2Fl%3Fpassword%3Ds3cr3tPW",
			"fallback://?primary=redis://h:1&secondary=postgres%3A%2F%2Fdb%2Fl%3Fpassword%3Dxxxxx"},
		{"fallback://?primary=redis%3A%2F%2F%3Ap%2540ss%40h", "fallback://?primary=redis%3A%2F%2F%3Axxxxx%40h"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	raw := "fallback://?primary=redis%3A%2F%2F%3Ap%2540ss%40h&secondary=postgres%3A%2F%2Fu%3Aan0therPW%40db"
	err := Error(fmt.Errorf("dial redis://:p%%40ss@h as p@ss, and postgres://u:an0therPW@db"), raw)
	for _, s := range []string{"p%40ss", "p@ss", "an0therPW"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("Error shows %q: %v", s, err)
		}
	}
}
