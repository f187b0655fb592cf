package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/turnstilelock/turnstile"
)

// BackendEnv names the environment variable that gives every command its
// lock store when no flag does. The environment of a process, unlike its
// command line, is not shown to other users by ps.
const BackendEnv = "TURNSTILE_BACKEND"

// maxBackendFile bounds what --backend-file reads: a URL, not a file
// given by mistake.
const maxBackendFile = 64 << 10

// ErrEmptyURL is the error of Resolve, wrapped, when a URL flag was
// given an empty value: "--backend must not be empty".
var ErrEmptyURL = errors.New("must not be empty")

// BackendFlags are the flags that name a command's lock store: the URL
// itself under one or more names (--backend, and a command's older name
// for it), or --backend-file, the file holding it. The zero value is
// ready: Register its flags on a FlagSet, parse, then Resolve.
type BackendFlags struct {
	url      string
	urlFlag  string // the name it was given under, "" if not given
	file     string
	fileFlag string // "backend-file"
	fileSet  bool
	// Want says what URLs the command takes, for the error of a value that
	// is no URL at all; "" for any store's.
	Want string
	// twice is the error of two names of the URL flag given together,
	// reported by Resolve: an error of Set would be printed by package
	// flag with the URL in it.
	twice error
}

// urlValue is a string flag that remembers which of its names was used.
type urlValue struct {
	b    *BackendFlags
	name string
}

func (v urlValue) String() string {
	if v.b == nil {
		return ""
	}
	return v.b.url
}

func (v urlValue) Set(s string) error {
	if v.b.urlFlag != "" && v.b.urlFlag != v.name {
		if v.b.twice == nil {
			v.b.twice = fmt.Errorf("--%s and --%s name the same thing: give one", v.b.urlFlag, v.name)
		}
		return nil
	}
	v.b.url, v.b.urlFlag = s, v.name
	return nil
}

// fileValue is --backend-file.
type fileValue struct{ b *BackendFlags }

func (v fileValue) String() string {
	if v.b == nil {
		return ""
	}
	return v.b.file
}

func (v fileValue) Set(s string) error {
	v.b.file, v.b.fileSet = s, true
	return nil
}

// Register adds the URL flag under each of names, and --backend-file.
func (b *BackendFlags) Register(fs *flag.FlagSet, names ...string) {
	b.RegisterFile(fs, "backend-file", names...)
}

// RegisterFile adds the URL flag under each of names, and the flag
// fileFlag naming a file that holds it.
func (b *BackendFlags) RegisterFile(fs *flag.FlagSet, fileFlag string, names ...string) {
	for _, n := range names {
		fs.Var(urlValue{b, n}, n, "")
	}
	b.fileFlag = fileFlag
	fs.Var(fileValue{b}, fileFlag, "")
}

// Resolve returns the URL the flags or, failing them, $TURNSTILE_BACKEND
// give (getenv nil: the flags only), and where it came from for messages
// ("--backend", "--backend-file PATH", "$TURNSTILE_BACKEND"). It returns
// "", "" when none names a store. Its errors never show the URL or the
// file's content.
func (b *BackendFlags) Resolve(getenv func(string) string) (raw, from string, err error) {
	switch {
	case b.twice != nil:
		return "", "", b.twice
	case b.urlFlag != "" && b.fileSet:
		return "", "", fmt.Errorf("--%s and --%s exclude each other", b.urlFlag, b.fileFlag)
	case b.urlFlag != "":
		if b.url == "" {
			return "", "", fmt.Errorf("--%s %w", b.urlFlag, ErrEmptyURL)
		}
		if !looksLikeURL(b.url) {
			return "", "", fmt.Errorf("--%s %w (%d bytes): %s", b.urlFlag, ErrNotURL, len(b.url), b.want())
		}
		return b.url, "--" + b.urlFlag, nil
	case b.fileSet:
		raw, err := readURLFile("--"+b.fileFlag, b.file)
		if err != nil {
			return "", "", err
		}
		if !looksLikeURL(raw) {
			return "", "", fmt.Errorf("--%s %s: the file's content %w (%d bytes): %s", b.fileFlag, b.file, ErrNotURL, len(raw), b.want())
		}
		return raw, "--" + b.fileFlag + " " + b.file, nil
	}
	if getenv != nil {
		if raw := getenv(BackendEnv); raw != "" {
			if !looksLikeURL(raw) {
				return "", "", fmt.Errorf("$%s %w (%d bytes): %s", BackendEnv, ErrNotURL, len(raw), b.want())
			}
			return raw, "$" + BackendEnv, nil
		}
	}
	return "", "", nil
}

// ErrNotURL is the error of Resolve, wrapped, for a value that is not a
// URL at all. The message shows none of it: a file named by mistake may
// hold a password, and a password given where the URL belongs is one.
var ErrNotURL = errors.New("is not a URL")

// want says what a store URL looks like.
func (b *BackendFlags) want() string {
	if b.Want != "" {
		return b.Want
	}
	return `want SCHEME://..., such as redis://127.0.0.1:6379 ("turnstile version" lists the schemes)`
}

// looksLikeURL reports whether raw starts as a store URL does: a scheme,
// then "://", or ':' after a scheme turnstile has (the opaque
// redis:user:password@host, which the store then refuses with its
// password masked). Anything else may be a secret put in the wrong place,
// and is never shown.
func looksLikeURL(raw string) bool {
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" || !validScheme(scheme) {
		return false
	}
	return strings.HasPrefix(rest, "//") || slices.Contains(turnstile.Schemes(), strings.ToLower(scheme))
}

// validScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func validScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// readURLFile reads the URL in the file at path: its only line,
// with surrounding white space trimmed.
func readURLFile(flagName, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%s must name a file", flagName)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %s", flagName, path, fileError(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return "", fmt.Errorf("%s %s is a directory, not a file holding a URL", flagName, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBackendFile+1))
	if err != nil {
		return "", fmt.Errorf("%s %s: %s", flagName, path, fileError(err))
	}
	if len(b) > maxBackendFile {
		return "", fmt.Errorf("%s %s is larger than %d KiB: want a file holding one URL", flagName, path, maxBackendFile>>10)
	}
	raw := strings.TrimSpace(string(b))
	switch {
	case raw == "":
		return "", fmt.Errorf("%s %s is empty: want a file holding one URL", flagName, path)
	case strings.ContainsAny(raw, "\r\n"):
		return "", fmt.Errorf("%s %s holds more than one line: want a file holding one URL", flagName, path)
	}
	return raw, nil
}

// fileError says why a file could not be read, without the path (the
// caller names it) and without any of its content.
func fileError(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
