//go:build !unix

package main

// stdinTerminal reports whether stdin is a terminal: on systems other
// than Unix turnstile cannot tell, and unlock asks for --yes.
func stdinTerminal() bool { return false }
