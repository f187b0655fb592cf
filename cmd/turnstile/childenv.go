package main

import (
	"slices"
	"strings"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// storeVars are the variables of turnstile's environment that name a lock
// store, credentials included: $TURNSTILE_BACKEND, and the demo's
// TURNSTILE_DEMO_REDIS and TURNSTILE_DEMO_POSTGRES (see package demo).
// The command under the lock does not get them: with the store's URL a
// job could release or take any lock in it, its own included, by mistake
// as much as on purpose.
var storeVars = []string{cli.BackendEnv, "TURNSTILE_DEMO_REDIS", "TURNSTILE_DEMO_POSTGRES"}

// childEnviron is the environment of the command under the lock: environ
// without storeVars, and with passBackend (--pass-backend) the store's
// URL backend as $TURNSTILE_BACKEND, wherever turnstile got it from.
func childEnviron(environ []string, passBackend bool, backend string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(storeVars, name) {
			env = append(env, kv)
		}
	}
	if passBackend {
		env = append(env, cli.BackendEnv+"="+backend)
	}
	return env
}
