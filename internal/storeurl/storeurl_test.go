package storeurl_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/storeurl"
)

var errInvalid = errors.New("invalid URL")

// secret is a password no message would spell by chance.
const secret = "QJZVWKQJZV"

var form = storeurl.Form{Schemes: []string{"ab", "abs"}, Shape: "host:port", Invalid: errInvalid}

// read reads raw through f, with known's parameters.
func read(t *testing.T, f storeurl.Form, raw string, known map[string]storeurl.Param) (*storeurl.URL, error) {
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
	known := map[string]storeurl.Param{}
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

	// An error of a Param is an invalid URL too, naming the parameter.
	known["alpha"] = func(string) error { return errors.New("is not a colour") }
	raw = "ab://u:" + secret + "@h?alpha=blue"
	_, err = read(t, form, raw, known)
	wantInvalid(t, raw, err, `alpha="blue" is not a colour`)
}

// TestOwnParams: the parameters a backend does not know are left for its
// driver, untouched.
func TestOwnParams(t *testing.T) {
	u, _ := url.Parse("ab://h?sslmode=disable&lock=2&x=1&x=2")
	var lock string
	err := form.Read(u, func(r *storeurl.URL) error {
		rest, err := r.OwnParams(map[string]storeurl.Param{"lock": func(v string) error { lock = v; return nil }})
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

// TestParsers: the Params that read values store or append what they
// read, and refuse bad values with the parameter, the value and what is
// wanted.
func TestParsers(t *testing.T) {
	type opt struct{ n int }
	var (
		n    int
		d    time.Duration
		s    string
		opts []opt
	)
	known := map[string]storeurl.Param{
		"int":      storeurl.Store(&n, storeurl.Int),
		"conns":    storeurl.Append(&opts, storeurl.IntIn(1, 8), func(n int) opt { return opt{n} }),
		"grace":    storeurl.Store(&d, storeurl.Duration),
		"timeout":  storeurl.Store(&d, storeurl.PositiveDuration),
		"delay":    storeurl.Store(&d, storeurl.DurationIn(0, time.Millisecond, "20us")),
		"session":  storeurl.Store(&d, storeurl.DurationIn(time.Millisecond, 0, "30s")),
		"mode":     storeurl.Store(&s, storeurl.OneOf("on", "off")),
		"anything": storeurl.Store(&s, storeurl.String),
	}
	for _, tc := range []struct {
		query string
		check func() bool
	}{
		{"int=-3", func() bool { return n == -3 }},
		{"conns=8", func() bool { return len(opts) == 1 && opts[0].n == 8 }},
		{"grace=-1s", func() bool { return d == -time.Second }},
		{"timeout=2s", func() bool { return d == 2*time.Second }},
		{"delay=0", func() bool { return d == 0 }},
		{"delay=1ms", func() bool { return d == time.Millisecond }},
		{"session=1ms", func() bool { return d == time.Millisecond }},
		{"mode=off", func() bool { return s == "off" }},
		{"anything=a%7Bb", func() bool { return s == "a{b" }},
	} {
		opts = nil
		if _, err := read(t, form, "ab://h?"+tc.query, known); err != nil || !tc.check() {
			t.Errorf("%s: %v (n %d, d %v, s %q, opts %v)", tc.query, err, n, d, s, opts)
		}
	}
	for query, want := range map[string]string{
		"int=x":         `int="x" is not a number`,
		"conns=0":       `conns="0" is not a number in [1, 8]`,
		"conns=9":       `conns="9" is not a number in [1, 8]`,
		"grace=soon":    `grace="soon" is not a duration such as 10s`,
		"timeout=0s":    `timeout="0s" is not a positive duration such as 5s`,
		"delay=-1us":    `delay="-1us" is not a duration from 0s to 1ms, such as 20us`,
		"delay=2ms":     `delay="2ms" is not a duration from 0s to 1ms, such as 20us`,
		"session=999us": `session="999us" is not a duration of 1ms or more, such as 30s`,
		"mode=maybe":    `mode="maybe" is not one of on, off`,
	} {
		_, err := read(t, form, "ab://u:"+secret+"@h?"+query, known)
		wantInvalid(t, query, err, want)
	}
}
