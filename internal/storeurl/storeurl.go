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
	"net/url"
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
	return redact.Error(err, u.String())
}

func (f *Form) read(u *url.URL, read func(*URL) error) error {
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
	return read(r)
}

// Hosts returns the addresses of the URL's hosts, as SplitHosts does.
func (u *URL) Hosts(defaultPort, emptyHost string) ([]string, error) {
	return SplitHosts(u.Host, defaultPort, emptyHost)
}

// Params reads the query: every parameter must be one that known names
// and be given once; known's function for each parameter given is called
// with its value, in the order of the parameters' names. An unknown
// parameter is refused with the names of the known ones.
func (u *URL) Params(known map[string]func(value string) error) error {
	q := u.Query()
	for _, name := range sortedKeys(q) {
		if known[name] == nil {
			return fmt.Errorf("unknown query parameter %q (known: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
	}
	_, err := u.readParams(q, known)
	return err
}

// OwnParams reads the parameters that known names, as Params does, and
// returns the others, untouched, for the backend's driver.
func (u *URL) OwnParams(known map[string]func(value string) error) (url.Values, error) {
	return u.readParams(u.Query(), known)
}

// readParams reads the parameters of q that known names and returns q
// without them.
func (u *URL) readParams(q url.Values, known map[string]func(string) error) (url.Values, error) {
	for _, name := range sortedKeys(known) {
		vals, ok := q[name]
		if !ok {
			continue
		}
		if len(vals) != 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", name, len(vals))
		}
		if err := known[name](vals[0]); err != nil {
			return nil, err
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

// PositiveDuration reads the value v of the parameter name as a duration
// over 0.
func PositiveDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration such as 5s", name, v)
	}
	return d, nil
}
