package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretPW is the password of the tests here: its pieces are checked too.
const secretPW = "s3cr3tPW"

// fileWith writes content to a new file and returns its path.
func fileWith(t *testing.T, name, content string) (path string) {
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --backend-file reads one URL, trimmed; every way a file can be wrong
// gets an error that names the file and shows none of its content.
func TestReadURLFile(t *testing.T) {
	t.Parallel()
	good := fileWith(t, "good", "  redis://:"+secretPW+"@127.0.0.1:6379/1 \n")
	if got, err := readURLFile("--backend-file", good); err != nil || got != "redis://:"+secretPW+"@127.0.0.1:6379/1" {
		t.Errorf("readURLFile(good) = %q, %v", got, err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"directory", t.TempDir(), "is a directory"},
		{"empty", fileWith(t, "empty", ""), "is empty"},
		{"blank", fileWith(t, "blank", " \n\t\n"), "is empty"},
		{"two lines", fileWith(t, "two", "redis://:"+secretPW+"@h\nredis://:"+secretPW+"@g\n"), "more than one line"},
		{"too large", fileWith(t, "large", strings.Repeat("redis://:"+secretPW+"@h ", 8000)), "larger than 64 KiB"},
		// Opens, and fails to read, even for root.
		{"unreadable", "/proc/self/mem", "input/output error"},
		{"no path", "", "--backend-file must name a file"},
	} {
		got, err := readURLFile("--backend-file", tc.path)
		if err == nil {
			t.Errorf("%s: read %q, want an error", tc.name, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--backend-file "+tc.path) {
			t.Errorf("%s: error %q, want it to name --backend-file %s and say %q", tc.name, err, tc.path, tc.want)
		}
		if strings.Contains(err.Error(), "r3tPW") {
			t.Errorf("%s: error %q shows the file's content", tc.name, err)
		}
	}
}

// backendEnv is a Getenv for which $TURNSTILE_BACKEND is v and every
// other variable is unset.
func backendEnv(v string) func(string) string {
	return func(k string) string {
		if k == BackendEnv {
			return v
		}
		return ""
	}
}

// parseURLFlags parses args with BackendFlags registered as --url and
// --backend, the way bench has them.
func parseURLFlags(args []string) (*BackendFlags, error) {
	var b BackendFlags
	fs := NewFlagSet("t")
	b.Register(fs, "url", "backend")
	return &b, fs.Parse(args)
}

// Every command takes its store from --backend (or its older name),
// --backend-file or $TURNSTILE_BACKEND, in that order, and says which
// one was wrong.
func TestBackendSources(t *testing.T) {
	t.Parallel()
	file := fileWith(t, "url", "redis://from-file:6379\n")
	for _, tc := range []struct {
		name     string
		args     []string
		env      string
		url, src string
		err      string
	}{
		{"flag", []string{"--backend", "redis://flag"}, "redis://env", "redis://flag", "--backend", ""},
		{"file beats env", []string{"--backend-file", file}, "redis://env", "redis://from-file:6379", "--backend-file " + file, ""},
		{"env", nil, "redis://env", "redis://env", "$TURNSTILE_BACKEND", ""},
		{"none", nil, "", "", "", ""},
		{"both", []string{"--backend", "redis://flag", "--backend-file", file}, "", "", "", "--backend and --backend-file exclude each other"},
		{"empty flag", []string{"--backend", ""}, "redis://env", "", "", "--backend must not be empty"},
		{"old and new name", []string{"--url", "redis://a", "--backend", "redis://b"}, "", "", "", "--url and --backend name the same thing"},
	} {
		b, err := parseURLFlags(tc.args)
		if err != nil {
			if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: parse: %v", tc.name, err)
			}
			continue
		}
		url, src, err := b.Resolve(backendEnv(tc.env))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
		case err != nil || url != tc.url || src != tc.src:
			t.Errorf("%s: %q from %q, %v; want %q from %q", tc.name, url, src, err, tc.url, tc.src)
		}
	}
}

// TestBackendHelp: the help names the flags, the alias and the
// environment variable, starts every description at the column asked
// for and stays within the help width.
func TestBackendHelp(t *testing.T) {
	h := BackendHelp(20, "the Redis server to measure", "a server of its own", "url")
	for _, want := range []string{"  --backend URL     the lock store: the Redis server", "  --url URL         the same as --backend", "  --backend-file FILE\n                    read the --backend URL", "$TURNSTILE_BACKEND, else a server of its own"} {
		if !strings.Contains(h, want) {
			t.Errorf("help lacks %q:\n%s", want, h)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(h, "\n"), "\n") {
		if len(line) > helpWidth {
			t.Errorf("line longer than %d: %q", helpWidth, line)
		}
		if !strings.HasPrefix(line, "  --") && !strings.HasPrefix(line, strings.Repeat(" ", 20)) {
			t.Errorf("line out of column: %q", line)
		}
	}
}
