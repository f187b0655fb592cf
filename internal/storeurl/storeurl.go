// Package storeurl reads what the URLs of every lock store share: the
// scheme, the user information, the list of hosts and the query
// parameters. A backend's URL parser reads through a Form and keeps only
// what is its own: its parameters and what they mean.
//
// Every error of Form.Read wraps the backend's invalid-URL error and
// passes through package redact, so that it shows none of the URL's
// secrets.
package storeurl

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/redact"
)

// Users says what a Form does with the user information of a URL.
type Users int

const (
	// UserOptional takes user[:password]@ or none.
	UserOptional Users = iota
	// UserRequired wants a user name.
	UserRequired
	// UserRefused refuses any user information.
	UserRefused
)

// Form is what the URLs of one backend look like.
type Form struct {
	// Schemes are the schemes the backend registers, in lower case. A
	// URL's scheme matches them in any case.
	Schemes []string
	// Shape is what follows "scheme://" in the form that errors show,
	// such as "host:port" or "user:password@host:port/db".
	Shape string
	// Users says whether a URL may, must or must not name a user.
	Users Users
	// Invalid is the error that every error of Read wraps: the backend's
	// invalid-URL error.
	Invalid error
}

// URL is a URL that passed the checks of a Form, for the backend to read
// the rest.
type URL struct {
	*url.URL
	// Scheme is the URL's scheme in lower case.
	Scheme string
	// Username and Password are those of the user information, or "".
	Username, Password string
}

// Read checks that u has one of f's schemes, is no opaque URL
// (scheme:host), has no fragment and has user information as f wants,
// then runs read on it. Errors of read that do not wrap f.Invalid are
// wrapped in it; every error Read returns has the secrets of u masked.
func (f *Form) Read(u *url.URL, read func(*URL) error) error {
	err := f.read(u, read)
	if err == nil {
		return nil
	}
	if !errors.Is(err, f.Invalid) {
		err = fmt.Errorf("%w: %w", f.Invalid, err)
	}
	return redact.Error(err, rawOf(u))
}

// rawOf is u written out as it was written in: url.URL.String drops
// the "//" of an empty authority (fallback://?primary=…), which would
// make it read as an opaque URL (fallback:?primary=…).
func rawOf(u *url.URL) string {
	s := u.String()
	if u.Opaque == "" && u.Scheme != "" && strings.HasPrefix(s, u.Scheme+":") && !strings.HasPrefix(s[len(u.Scheme)+1:], "//") {
		return u.Scheme + "://" + s[len(u.Scheme)+1:]
	}
	return s
}

func (f *Form) read(u *url.URL, read func(*URL) error) error {
	// Before anything else reads, or shows, a part of the URL that may
	// be a piece of the password.
	if redact.Ambiguous(rawOf(u)) {
		return redact.ErrAmbiguous
	}
	scheme := strings.ToLower(u.Scheme)
	if !slices.Contains(f.Schemes, scheme) {
		return fmt.Errorf("scheme %q is not %s", u.Scheme, strings.Join(f.Schemes, " or "))
	}
	if u.Opaque != "" {
		return fmt.Errorf("want %s://%s, got %s", scheme, f.Shape, redact.URL(u.String()))
	}
	if u.Fragment != "" {
		return fmt.Errorf("unexpected fragment #%s", u.Fragment)
	}
	r := &URL{URL: u, Scheme: scheme}
	if u.User != nil {
		r.Username = u.User.Username()
		r.Password, _ = u.User.Password()
	}
	switch {
	case f.Users == UserRefused && u.User != nil:
		return errors.New("user information is not supported")
	case f.Users == UserRequired && r.Username == "":
		return fmt.Errorf("no user: want %s://%s", scheme, f.Shape)
	}
	if q := u.Query(); q.Has(PasswordFileParam) {
		if f.Users == UserRefused {
			return fmt.Errorf("%s: user information is not supported", PasswordFileParam)
		}
		if len(q[PasswordFileParam]) != 1 {
			return fmt.Errorf("query parameter %q given %d times", PasswordFileParam, len(q[PasswordFileParam]))
		}
		if _, set := u.User.Password(); set {
			return fmt.Errorf("a password both in the URL and in %s: give one", PasswordFileParam)
		}
		pw, err := ReadPasswordFile(q.Get(PasswordFileParam))
		if err != nil {
			return fmt.Errorf("%s=%q: %w", PasswordFileParam, q.Get(PasswordFileParam), err)
		}
		r.Password = pw
		// The backend reads the rest of the query as if the parameter
		// had never been there.
		q.Del(PasswordFileParam)
		rest := *u
		rest.RawQuery = q.Encode()
		r.URL = &rest
	}
	return read(r)
}

// PasswordFileParam is the query parameter that every URL with user
// information takes: the path of a file whose content is the password,
// for a password kept out of the URL (and so out of command lines,
// environment listings and configuration files), such as a mounted
// secret. One trailing newline is not part of the password.
const PasswordFileParam = "password_file"

// maxPasswordFile bounds what ReadPasswordFile reads: a password file
// is small, and a path named by mistake (a log, a device) must not be
// read whole.
const maxPasswordFile = 64 << 10

// ReadPasswordFile reads a password from the file at path. Its errors
// say what is wrong with the file without quoting it.
func ReadPasswordFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fileErr(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fileErr(err)
	}
	if len(data) > maxPasswordFile {
		return "", fmt.Errorf("is over %d KiB: not a password file", maxPasswordFile>>10)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case pw == "":
		return "", errors.New("is empty")
	case strings.ContainsAny(pw, "\r\n\x00"):
		return "", errors.New("has more than one line: want the password alone")
	}
	return pw, nil
}

// Hosts returns the addresses of the URL's hosts, as SplitHosts does.
func (u *URL) Hosts(defaultPort, emptyHost string) ([]string, error) {
	return SplitHosts(u.Host, defaultPort, emptyHost)
}

// Param reads the value of one query parameter. Its error says what is
// wrong with the value, as "is not a number": the error of Params names
// the parameter and the value before it.
type Param func(value string) error

// Params reads the query: every parameter must be one that known names
// and be given once; known's Param for each parameter given is called
// with its value, in the order of the parameters' names. An unknown
// parameter is refused with its name and the names of the known ones,
// never its value: it may be a misspelt secret (pasword=…).
func (u *URL) Params(known map[string]Param) error {
	q := u.Query()
	for _, name := range sortedKeys(q) {
		if known[name] == nil {
			return Unknown(q, known, name, "known: "+strings.Join(sortedKeys(known), ", "))
		}
	}
	_, err := readParams(q, known)
	return err
}

// OwnParams reads the parameters that known names, as Params does, and
// returns the others, untouched, for the backend's driver.
func (u *URL) OwnParams(known map[string]Param) (url.Values, error) {
	return readParams(u.Query(), known)
}

// readParams reads the parameters of q that known names and returns q
// without them.
func readParams(q url.Values, known map[string]Param) (url.Values, error) {
	for _, name := range sortedKeys(known) {
		vals, ok := q[name]
		if !ok {
			continue
		}
		if len(vals) != 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", name, len(vals))
		}
		if err := known[name](vals[0]); err != nil {
			return nil, fmt.Errorf("%s=%q %w", name, vals[0], err)
		}
		delete(q, name)
	}
	return q, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Store is a Param that reads its value with parse into *dst.
func Store[T any](dst *T, parse func(string) (T, error)) Param {
	return func(v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*dst = x
		return nil
	}
}

// Append is a Param that reads its value with parse and appends the
// option it makes of it to *opts.
func Append[T, O any](opts *[]O, parse func(string) (T, error), option func(T) O) Param {
	return func(v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*opts = append(*opts, option(x))
		return nil
	}
}

// String reads any value as it is.
func String(v string) (string, error) { return v, nil }

// Int reads a whole number.
func Int(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("is not a number")
	}
	return n, nil
}

// IntIn reads a whole number from lo to hi.
func IntIn(lo, hi int) func(string) (int, error) {
	return func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("is not a number in [%d, %d]", lo, hi)
		}
		return n, nil
	}
}

// Duration reads a duration such as 10s.
func Duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("is not a duration such as 10s")
	}
	return d, nil
}

// PositiveDuration reads a duration over 0.
func PositiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("is not a positive duration such as 5s")
	}
	return d, nil
}

// DurationIn reads a duration from lo to hi, or of lo or more for hi 0;
// example is one, for the error.
func DurationIn(lo, hi time.Duration, example string) func(string) (time.Duration, error) {
	return func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		switch {
		case hi == 0 && (err != nil || d < lo):
			return 0, fmt.Errorf("is not a duration of %v or more, such as %s", lo, example)
		case hi != 0 && (err != nil || d < lo || d > hi):
			return 0, fmt.Errorf("is not a duration from %v to %v, such as %s", lo, hi, example)
		}
		return d, nil
	}
}

// OneOf reads one of the values given.
func OneOf(values ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		if !slices.Contains(values, v) {
			return "", fmt.Errorf("is not one of %s", strings.Join(values, ", "))
		}
		return v, nil
	}
}

// Database returns the number the URL's path names, as in
// redis://host/3, and 0 for no path.
func (u *URL) Database() (int, error) {
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(db)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("database %q in the path is not a non-negative number", db)
	}
	return n, nil
}
