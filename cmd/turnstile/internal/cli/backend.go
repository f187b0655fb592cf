package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
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
		return fmt.Errorf("--%s and --%s name the same thing: give one", v.b.urlFlag, v.name)
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
	case b.urlFlag != "" && b.fileSet:
		return "", "", fmt.Errorf("--%s and --%s exclude each other", b.urlFlag, b.fileFlag)
	case b.urlFlag != "":
		if b.url == "" {
			return "", "", fmt.Errorf("--%s %w", b.urlFlag, ErrEmptyURL)
		}
		return b.url, "--" + b.urlFlag, nil
	case b.fileSet:
		raw, err := readURLFile("--"+b.fileFlag, b.file)
		if err != nil {
			return "", "", err
		}
		return raw, "--" + b.fileFlag + " " + b.file, nil
	}
	if getenv != nil {
		if raw := getenv(BackendEnv); raw != "" {
			return raw, "$" + BackendEnv, nil
		}
	}
	return "", "", nil
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
