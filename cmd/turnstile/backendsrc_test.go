//go:build unix

package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// secretPW is the password of the tests here: its pieces are checked too,
// for URLs that cut it at an unescaped '#'.
const secretPW = "s3cr3tPW"

// showsSecret reports whether out shows secretPW or a piece of it.
func showsSecret(out string) bool {
	return strings.Contains(out, secretPW) || strings.Contains(out, "r3tPW") || strings.Contains(out, "s3c#")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --backend-file reads one URL, trimmed; every way a file can be wrong
// gets an error that names the file and shows none of its content.
func TestReadURLFile(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "good", "  redis://:"+secretPW+"@127.0.0.1:6379/1 \n")
	if got, err := readURLFile("--backend-file", good); err != nil || got != "redis://:"+secretPW+"@127.0.0.1:6379/1" {
		t.Errorf("readURLFile(good) = %q, %v", got, err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"directory", t.TempDir(), "is a directory"},
		{"empty", writeFile(t, "empty", ""), "is empty"},
		{"blank", writeFile(t, "blank", " \n\t\n"), "is empty"},
		{"two lines", writeFile(t, "two", "redis://:"+secretPW+"@h\nredis://:"+secretPW+"@g\n"), "more than one line"},
		{"too large", writeFile(t, "large", strings.Repeat("redis://:"+secretPW+"@h ", 8000)), "larger than 64 KiB"},
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
		if showsSecret(err.Error()) {
			t.Errorf("%s: error %q shows the file's content", tc.name, err)
		}
	}
}

// Every command takes its store from --backend (or its older name),
// --backend-file or $TURNSTILE_BACKEND, in that order, and says which
// one was wrong.
func TestBackendSources(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "url", "redis://from-file:6379\n")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == backendEnv {
				return v
			}
			return ""
		}
	}
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
		var b backendFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		b.register(fs, "url", "backend")
		if err := fs.Parse(tc.args); err != nil {
			if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: parse: %v", tc.name, err)
			}
			continue
		}
		url, src, err := b.resolve(env(tc.env))
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

// turnstile run takes a password-protected store from the environment
// or a file, so that the password is never on its command line.
func TestRunBackendOutOfArgv(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	if _, err := srv.Do("CONFIG", "SET", "requirepass", secretPW); err != nil {
		t.Fatal(err)
	}
	withPW := "redis://:" + secretPW + "@" + srv.Addr()
	file := writeFile(t, "backend", withPW+"\n")
	wrong := writeFile(t, "wrong", "redis://:wrong"+secretPW+"@"+srv.Addr())
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"environment", []string{backendEnv + "=" + withPW}, nil, exitOK, ""},
		{"file", nil, []string{"--backend-file", file}, exitOK, ""},
		{"file beats environment", []string{backendEnv + "=redis://127.0.0.1:1"}, []string{"--backend-file", file}, exitOK, ""},
		{"wrong password in file", nil, []string{"--backend-file", wrong}, exitUnavailable, "xxxxx@" + srv.Addr()},
		{"missing file", nil, []string{"--backend-file", file + ".nope"}, exitUsage, "no such file"},
		{"both", nil, []string{"--backend-file", file, "--backend", withPW}, exitUsage, "exclude each other"},
	} {
		args := append(append([]string{"run"}, tc.args...), "--key", "k", "--no-wait", "--", "true")
		r := runTurnstile(t, tc.env, args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
		if showsSecret(r.stderr + r.stdout) {
			t.Errorf("%s: output shows the password:\n%s%s", tc.name, r.stdout, r.stderr)
		}
	}
}

// However a URL is mistyped, no command shows its password.
func TestCommandsNeverShowPassword(t *testing.T) {
	t.Parallel()
	pgFile := writeFile(t, "pg", "mysql://u:"+secretPW+"@h/db")
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--backend", "redis:default:" + secretPW + "@127.0.0.1:16380", "--key", "k", "--", "true"}, "redis:xxxxx@127.0.0.1:16380"},
		{nil, []string{"run", "--backend", "//:" + secretPW + "@127.0.0.1:16380", "--key", "k", "--", "true"}, "//:xxxxx@127.0.0.1:16380"},
		{nil, []string{"run", "--backend", "redis://u:s3c#r3tPW@127.0.0.1:1", "--key", "k", "--", "true"}, "redis://u:xxxxx@127.0.0.1:1"},
		{nil, []string{"run", "--backend", "redis://:" + secretPW + "@127.0.0.1:1", "--key", "k", "--", "true"}, "connection refused"},
		{nil, []string{"run", "--backend", "redis://:" + secretPW + "@127.0.0.1:1/?password=" + secretPW, "--key", "k", "--", "true"}, "unknown query parameter"},
		{[]string{backendEnv + "=redis:u:" + secretPW + "@127.0.0.1:1"}, []string{"run", "--key", "k", "--", "true"}, "redis:xxxxx@127.0.0.1:1"},
		{nil, []string{"demo", "--redis", "http://:" + secretPW + "@127.0.0.1:1", "rider"}, `--redis "http://:xxxxx@127.0.0.1:1"`},
		{nil, []string{"demo", "--backend", "redis://:" + secretPW + "@127.0.0.1:1", "rider"}, "redis://:xxxxx@127.0.0.1:1"},
		{nil, []string{"demo", "--postgres-file", pgFile, "rider"}, `--postgres-file ` + pgFile + ` "mysql://u:xxxxx@h/db"`},
		{[]string{backendEnv + "=etcd://u:" + secretPW + "@h"}, []string{"demo", "rider"}, "unset TURNSTILE_BACKEND"},
		{nil, []string{"bench", "--url", "redis:default:" + secretPW + "@127.0.0.1:1"}, "--url redis:xxxxx@127.0.0.1:1"},
		{nil, []string{"bench", "--backend", "redis://u:s3c#r3tPW@127.0.0.1:1"}, "--backend"},
		{nil, []string{"bench", "--url", "redis://u:" + secretPW + "@127.0.0.1:1", "--duration", "100ms", "--only", "uncontended/c=1$"}, "redis://u:xxxxx@127.0.0.1:1"},
		{[]string{backendEnv + "=postgres://u:" + secretPW + "@h/db"}, []string{"bench"}, "$TURNSTILE_BACKEND postgres://u:xxxxx@h/db"},
	} {
		r := runTurnstile(t, tc.env, tc.args...)
		if r.code == exitOK || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q %q: exit %d, stderr %q; want an error saying %q", tc.env, tc.args, r.code, r.stderr, tc.want)
		}
		if showsSecret(r.stderr + r.stdout) {
			t.Errorf("%q %q: output shows the password:\n%s%s", tc.env, tc.args, r.stdout, r.stderr)
		}
	}
}

// bench and demo take their store from a file or the environment too.
func TestBenchAndDemoBackendSources(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "url", "redis://127.0.0.1:7001\n")
	t.Run("bench file", func(t *testing.T) {
		o, err := parseBench([]string{"--backend-file", file})
		if err != nil || o.url != "redis://127.0.0.1:7001" || o.urlFrom != "--backend-file "+file {
			t.Fatalf("parseBench = %+v, %v", o, err)
		}
	})
	t.Run("bench backend", func(t *testing.T) {
		o, err := parseBench([]string{"--backend", "redlock://127.0.0.1:1,127.0.0.1:2"})
		if err != nil || o.target.redlock == "" || o.urlFrom != "--backend" {
			t.Fatalf("parseBench = %+v, %v", o, err)
		}
	})
	t.Run("demo file", func(t *testing.T) {
		o, err := parseDemo([]string{"--backend-file", file, "rider"})
		if err != nil || o.redisURL != "redis://127.0.0.1:7001" || o.redisFrom != "--backend-file "+file {
			t.Fatalf("parseDemo = %+v, %v", o, err)
		}
	})
	t.Run("demo postgres file", func(t *testing.T) {
		pg := writeFile(t, "pg", "postgres://u:"+secretPW+"@127.0.0.1/db")
		o, err := parseDemo([]string{"--postgres-file", pg, "rider"})
		if err != nil || o.pgURL != "postgres://u:"+secretPW+"@127.0.0.1/db" {
			t.Fatalf("parseDemo = %+v, %v", o, err)
		}
	})
}

// In the environment, TURNSTILE_BACKEND names the store of bench and
// demo; --in-process makes the demo ignore it.
func TestBenchAndDemoBackendEnv(t *testing.T) {
	t.Setenv(backendEnv, "redis://127.0.0.1:7002")
	if o, err := parseBench(nil); err != nil || o.url != "redis://127.0.0.1:7002" || !strings.Contains(o.target.name, "(from $TURNSTILE_BACKEND)") {
		t.Errorf("parseBench = %+v, %v", o, err)
	}
	if o, err := parseBench([]string{"--url", "redis://127.0.0.1:7003"}); err != nil || o.url != "redis://127.0.0.1:7003" {
		t.Errorf("parseBench --url = %+v, %v", o, err)
	}
	if o, err := parseDemo([]string{"rider"}); err != nil || o.redisURL != "redis://127.0.0.1:7002" || o.redisFrom != "$TURNSTILE_BACKEND" {
		t.Errorf("parseDemo = %+v, %v", o, err)
	}
	if o, err := parseDemo([]string{"--in-process", "rider"}); err != nil || o.redisURL != "" {
		t.Errorf("parseDemo --in-process = %+v, %v", o, err)
	}
}
