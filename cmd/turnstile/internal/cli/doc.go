// Package cli holds what turnstile's commands share: the exit codes, the
// flags that name a lock store (--backend, --backend-file and
// $TURNSTILE_BACKEND), the handling of the signals that stop a command,
// and the --metrics-addr server.
//
// The product commands (run, bench) live in package main; the demo lives in
// package demo. Both import this package so that a flag, a message or an
// exit code means the same thing in every command.
package cli
