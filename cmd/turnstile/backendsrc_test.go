//go:build unix

package main

import (
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
		{nil, []string{"run", "--backend", "//:" + secretPW + "@127.0.0.1:16380", "--key", "k", "--", "true"}, "--backend is not a URL (27 bytes)"},
		// An '@' after the '#': where the password ends is unclear, and the
		// URL is refused without being shown.
		{nil, []string{"run", "--backend", "redis://u:s3c#r3tPW@127.0.0.1:1", "--key", "k", "--", "true"}, "the userinfo is ambiguous"},
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

// bench takes its store from a file or the environment too (the demo's
// flags are tested in its package).
func TestBenchBackendSources(t *testing.T) {
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
}

// In the environment, TURNSTILE_BACKEND names the store of bench.
func TestBenchBackendEnv(t *testing.T) {
	t.Setenv(backendEnv, "redis://127.0.0.1:7002")
	if o, err := parseBench(nil); err != nil || o.url != "redis://127.0.0.1:7002" || !strings.Contains(o.target.name, "(from $TURNSTILE_BACKEND)") {
		t.Errorf("parseBench = %+v, %v", o, err)
	}
	if o, err := parseBench([]string{"--url", "redis://127.0.0.1:7003"}); err != nil || o.url != "redis://127.0.0.1:7003" {
		t.Errorf("parseBench --url = %+v, %v", o, err)
	}
}

// However a secret reaches a command — a URL flag given under two names,
// a password where the URL belongs, a misspelled secret parameter, a URL
// typed where an argument or a flag's value belongs — no output shows it.
func TestCommandsNeverEchoSecrets(t *testing.T) {
	t.Parallel()
	const secret = "hunter2" + secretPW
	pwFile := writeFile(t, "password", secret+"\n")
	u1, u2 := "redis://u:"+secret+"@127.0.0.1:1", "redis://u:"+secret+"@127.0.0.1:2"
	misspelled := "redis://127.0.0.1:1/?pasword=" + secret
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"bench --url and --backend", nil, []string{"bench", "--url", u1, "--backend", u2}, "--url and --backend name the same thing"},
		{"demo --redis and --backend", nil, []string{"demo", "--redis", u1, "--backend", u2}, "--redis and --backend name the same thing"},
		{"password file as --backend-file", nil, []string{"run", "--backend-file", pwFile, "--key", "k", "--", "true"}, "the file's content is not a URL (15 bytes)"},
		{"password file as status --backend-file", nil, []string{"status", "--backend-file", pwFile, "k"}, "the file's content is not a URL (15 bytes)"},
		{"password in $TURNSTILE_BACKEND", []string{backendEnv + "=" + secret}, []string{"status", "k"}, "$TURNSTILE_BACKEND is not a URL (15 bytes)"},
		{"password as --backend", nil, []string{"ls", "--backend", secret}, "--backend is not a URL (15 bytes)"},
		{"misspelled parameter, run", nil, []string{"run", "--backend", misspelled, "--key", "k", "--", "true"}, `unknown query parameter "pasword"`},
		{"misspelled parameter, status", nil, []string{"status", "--backend", misspelled, "k"}, `unknown query parameter "pasword"`},
		{"misspelled parameter, bench", nil, []string{"bench", "--url", misspelled, "--duration", "100ms", "--only", "uncontended/c=1$"}, "pasword=xxxxx"},
		{"URL as the command", nil, []string{u1}, `unknown command "redis://u:xxxxx@127.0.0.1:1"`},
		{"URL after help", nil, []string{"help", misspelled}, `unknown command "redis://127.0.0.1:1/?pasword=xxxxx"`},
		{"URL before --", nil, []string{"run", "--key", "k", u1, "--", "true"}, `missing "--" before the command "redis://u:xxxxx@127.0.0.1:1"`},
		{"URL as a second key", nil, []string{"status", "k", misspelled}, "one KEY only"},
		{"URL as an argument of ls", nil, []string{"ls", u1}, "ls takes no arguments"},
		{"URL as an argument of version", nil, []string{"version", u1}, "unexpected argument"},
		{"URL as a shell", nil, []string{"completion", u1}, "unknown shell"},
		{"URL as an argument of bench", nil, []string{"bench", u1}, "unexpected argument"},
		{"URL as a scenario", nil, []string{"demo", misspelled}, "unknown scenario"},
		{"URL as a flag's value", nil, []string{"run", "--ttl", misspelled, "--key", "k", "--", "true"}, "for flag -ttl"},
	} {
		r := runTurnstile(t, tc.env, tc.args...)
		if r.code == exitOK || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want an error saying %q", tc.name, r.code, r.stderr, tc.want)
		}
		if strings.Contains(r.stdout+r.stderr, "hunter2") {
			t.Errorf("%s: output shows the secret:\n%s%s", tc.name, r.stdout, r.stderr)
		}
	}
}
