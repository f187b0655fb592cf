package main

import "github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"

// backendEnv names the environment variable that gives every command its
// lock store when no flag does (see cli.BackendFlags).
const backendEnv = cli.BackendEnv
