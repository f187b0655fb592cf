package main

import (
	"fmt"
	"io"
	"strings"
)

// storeWarning is the warning "turnstile run" prints before it takes a
// lock in a store that cannot do what a run is for, or "": mem:// lives
// in the one turnstile process, and a Redlock of one node is one Redis
// without a quorum's safety.
func storeWarning(backend string) string {
	scheme, rest, _ := strings.Cut(backend, "://")
	switch strings.ToLower(scheme) {
	case "mem":
		return "mem:// keeps the lock inside this one turnstile process: it excludes no other run, on this host or another"
	case "redlock":
		if redlockNodes(rest) == 1 {
			return "a redlock:// URL with one node is no Redlock: one Redis, without the quorum that lets a Redlock outlive a node; give 3 or 5 nodes, or use redis://"
		}
	}
	return ""
}

// redlockNodes counts the hosts of the authority that starts rest, the
// part of a redlock:// URL after "://".
func redlockNodes(rest string) int {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	hosts := rest[strings.LastIndexByte(rest, '@')+1:]
	if hosts == "" {
		return 0
	}
	return strings.Count(hosts, ",") + 1
}

// warnStore prints storeWarning's warning for command name, if any.
func warnStore(stderr io.Writer, name, backend string) {
	if w := storeWarning(backend); w != "" {
		fmt.Fprintf(stderr, "turnstile %s: warning: %s\n", name, w)
	}
}

// defaultStoreNote is the line that says which store a command tried
// when it failed on the one it uses by default (from is ""), or "".
func defaultStoreNote(name, from string) string {
	if from != "" {
		return ""
	}
	return fmt.Sprintf("turnstile %s: no --backend given: tried the default %s (set --backend, --backend-file or $%s)\n", name, defaultBackend, backendEnv)
}
