package storeurl_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/storeurl"
)

var errInvalid = errors.New("invalid URL")

// secret is a password no message would spell by chance.
const secret = "QJZVWKQJZV"

var form = storeurl.Form{Schemes: []string{"ab", "abs"}, Shape: "host:port", Invalid: errInvalid}

// read reads raw through f, with known's parameters.
func read(t *testing.T, f storeurl.Form, raw string, known map[string]func(string) error) (*storeurl.URL, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var got *storeurl.URL
	err = f.Read(u, func(r *storeurl.URL) error {
		got = r
		return r.Params(known)
	})
	return got, err
}

// wantInvalid fails t unless err wraps errInvalid, says want and shows
// no secret.
func wantInvalid(t *testing.T, raw string, err error, want string) {
	t.Helper()
	if !errors.Is(err, errInvalid) {
		t.Fatalf("%s: %v, want an error wrapping %v", raw, err, errInvalid)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %q does not say %q", raw, err, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("%s: %q shows the password", raw, err)
	}
}

// TestUnknownParam: an unknown parameter is refused with the known ones,
// sorted, whatever order they were declared in; a known one given twice
// is refused; known ones reach their functions, in the order of their
// names.
func TestUnknownParam(t *testing.T) {
	var seen []string
	known := map[string]func(string) error{}
	for _, n := range []string{"zeta", "alpha", "mid"} {
		known[n] = func(v string) error { seen = append(seen, n+"="+v); return nil }
	}
	raw := "ab://u:" + secret + "@h?zeta=1&colour=red&alpha=2"
	_, err := read(t, form, raw, known)
	wantInvalid(t, raw, err, `unknown query parameter "colour" (known: alpha, mid, zeta)`)
	if len(seen) != 0 {
		t.Fatalf("parameters read before an unknown one was refused: %q", seen)
	}
	raw = "ab://u:" + secret + "@h?mid=1&mid=2"
	_, err = read(t, form, raw, known)
	wantInvalid(t, raw, err, `query parameter "mid" given 2 times`)

	seen = nil
	if _, err := read(t, form, "ab://h?zeta=1&mid=3&alpha=2", known); err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha=2", "mid=3", "zeta=1"}; !slices.Equal(seen, want) {
		t.Fatalf("read %q, want %q", seen, want)
	}

	// An error of a parameter's function is an invalid URL too.
	known["alpha"] = func(v string) error { return errors.New("alpha=" + v + " is not a colour") }
	raw = "ab://u:" + secret + "@h?alpha=" + secret
	_, err = read(t, form, raw, known)
	wantInvalid(t, raw, err, "is not a colour")
}

// TestOwnParams: the parameters a backend does not know are left for its
// driver, untouched.
func TestOwnParams(t *testing.T) {
	u, _ := url.Parse("ab://h?sslmode=disable&lock=2&x=1&x=2")
	var lock string
	err := form.Read(u, func(r *storeurl.URL) error {
		rest, err := r.OwnParams(map[string]func(string) error{"lock": func(v string) error { lock = v; return nil }})
		if err != nil {
			return err
		}
		if got := rest.Encode(); got != "sslmode=disable&x=1&x=2" {
			t.Errorf("rest %q", got)
		}
		return nil
	})
	if err != nil || lock != "2" {
		t.Fatalf("lock=%q, %v", lock, err)
	}
}

// TestUserInfo: user and password are read; a form that wants a user
// refuses a URL without one, and a form that takes none refuses one.
func TestUserInfo(t *testing.T) {
	r, err := read(t, form, "ab://alice:"+secret+"@h", nil)
	if err != nil || r.Username != "alice" || r.Password != secret {
		t.Fatalf("user %q password %q, %v", r.Username, r.Password, err)
	}
	r, err = read(t, form, "ab://h", nil)
	if err != nil || r.Username != "" || r.Password != "" {
		t.Fatalf("no user information: user %q password %q, %v", r.Username, r.Password, err)
	}
	need := form
	need.Users, need.Shape = storeurl.UserRequired, "user@host/db"
	for _, raw := range []string{"ab://h/db", "ab://:" + secret + "@h/db"} {
		_, err := read(t, need, raw, nil)
		wantInvalid(t, raw, err, "no user: want ab://user@host/db")
	}
	none := form
	none.Users = storeurl.UserRefused
	raw := "ab://u:" + secret + "@h"
	_, err = read(t, none, raw, nil)
	wantInvalid(t, raw, err, "user information is not supported")
}

// TestScheme: the scheme matches in any case and is read in lower case;
// another scheme, the opaque form and a fragment are refused, with no
// secret shown.
func TestScheme(t *testing.T) {
	r, err := read(t, form, "ABS://h", nil)
	if err != nil || r.Scheme != "abs" {
		t.Fatalf("ABS://h: scheme %q, %v", r.Scheme, err)
	}
	for raw, want := range map[string]string{
		"xy://u:" + secret + "@h":     `scheme "xy" is not ab or abs`,
		"ab:u:" + secret + "@h":       "want ab://host:port, got ab:xxxxx@h",
		"Abs:" + secret + "@h":        "want abs://host:port",
		"ab://h#password=" + secret:   "unexpected fragment",
		"ab://u:" + secret + "@h#x=y": "unexpected fragment #x=y",
	} {
		_, err := read(t, form, raw, nil)
		wantInvalid(t, raw, err, want)
	}
}

// TestDatabase: the path names a database number, or none.
func TestDatabase(t *testing.T) {
	for raw, want := range map[string]int{"ab://h": 0, "ab://h/": 0, "ab://h/0": 0, "ab://h/15": 15} {
		u, _ := url.Parse(raw)
		var n int
		err := form.Read(u, func(r *storeurl.URL) (err error) { n, err = r.Database(); return err })
		if err != nil || n != want {
			t.Errorf("%s: database %d, %v; want %d", raw, n, err, want)
		}
	}
	for _, raw := range []string{"ab://h/x", "ab://h/-1", "ab://h/1/2"} {
		u, _ := url.Parse(raw)
		err := form.Read(u, func(r *storeurl.URL) error { _, err := r.Database(); return err })
		wantInvalid(t, raw, err, "is not a non-negative number")
	}
}
