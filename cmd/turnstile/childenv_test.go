//go:build unix

package main

import (
	"context"
	"strings"
	"testing"
)

// The command under the lock does not get the store's URL, which would
// let it release or take any lock in the store, unless --pass-backend
// asks for it; then it gets the URL turnstile used, wherever it came from.
func TestRunCommandGetsNoStoreURL(t *testing.T) {
	const secret = "s3cr3tPW"
	t.Setenv(backendEnv, "redis://u:"+secret+"@127.0.0.1:1")
	t.Setenv("TURNSTILE_DEMO_REDIS", "redis://u:"+secret+"@127.0.0.1:2")
	t.Setenv("TURNSTILE_DEMO_POSTGRES", "postgres://u:"+secret+"@127.0.0.1:3/db")
	file := writeFile(t, "url", "mem://\n")
	printEnv := []string{"--", "sh", "-c", `env | grep '^TURNSTILE_' | sort`}
	for _, tc := range []struct {
		name string
		args []string
		want string // the TURNSTILE_BACKEND line the command sees, "" for none
	}{
		{"from the flag", []string{"--backend", "mem://"}, ""},
		{"from a file", []string{"--backend-file", file}, ""},
		{"passed on", []string{"--backend", "mem://", "--pass-backend"}, backendEnv + "=mem://"},
		{"passed on from a file", []string{"--backend-file", file, "--pass-backend"}, backendEnv + "=mem://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			args := append(append(tc.args, "--key", "k"), printEnv...)
			if code := runCmd(context.Background(), args, &out, &errOut); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, errOut.String())
			}
			env := out.String()
			if strings.Contains(env, secret) || strings.Contains(env, "TURNSTILE_DEMO_") {
				t.Errorf("the command got a store's URL:\n%s", env)
			}
			got := ""
			for _, line := range strings.Split(env, "\n") {
				if strings.HasPrefix(line, backendEnv+"=") {
					got = line
				}
			}
			if got != tc.want {
				t.Errorf("the command's %s line is %q, want %q; its TURNSTILE_ variables:\n%s", backendEnv, got, tc.want, env)
			}
			if !strings.Contains(env, "TURNSTILE_KEY=k\n") || !strings.Contains(env, "TURNSTILE_TOKEN=") {
				t.Errorf("the command lacks TURNSTILE_KEY or TURNSTILE_TOKEN:\n%s", env)
			}
		})
	}
}
