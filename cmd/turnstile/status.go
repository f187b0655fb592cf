package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// statusCmd implements "turnstile status".
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o opFlags
	fs := o.flagSet("status")
	asJSON := fs.Bool("json", false, "")
	held := fs.Bool("held", false, "")
	key, help, err := o.parseKey(fs, args, stdout, statusUsage)
	if help {
		return exitOK
	}
	if err != nil {
		return usageError(stderr, "status", err)
	}

	ctx, ks, done, code := o.openBounded(ctx, "status", stderr)
	if ks == nil {
		return code
	}
	defer done()
	states, err := ks.inspect(ctx, key)
	if err != nil {
		return o.storeError(stderr, "status", err)
	}
	js := toJSON(key, states)
	if *asJSON {
		out, _ := json.Marshal(js)
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		printState(stdout, key, states, o.kind)
	}
	if *held && !js.Held {
		return exitFree
	}
	return exitOK
}

// exitFree is the exit status of "status --held" for a free lock, and of
// "unlock --force" for a lock nobody held.
const exitFree = 1

// printState shows key's states in the kinds looked at for people: only
// names the one kind --kind named, if any.
func printState(w io.Writer, key string, states []kindState, only *opKind) {
	hs := held(states)
	switch {
	case len(hs) == 0 && only != nil:
		fmt.Fprintf(w, "%s is free\n  kind        %s\n", oneLine(key), only.name)
	case len(hs) == 0:
		fmt.Fprintf(w, "%s is free\n", oneLine(key))
	default:
		fmt.Fprintf(w, "%s is held\n", oneLine(key))
	}
	for _, s := range hs {
		if len(s.st.Holders) == 0 { // held, by an owner the store cannot name
			fmt.Fprintf(w, "  kind        %s\n", s.kind)
		}
		for _, h := range s.st.Holders {
			fmt.Fprintf(w, "  kind        %s\n  owner       %s\n  token       %d\n  ttl left    %s\n", s.kind, oneLine(h.Owner), h.Token, ttlText(h.TTL))
		}
	}
	if t := lastToken(states); t > 0 {
		fmt.Fprintf(w, "  last token  %d\n", t)
	}
	if n := waiters(states); n >= 0 {
		fmt.Fprintf(w, "  waiters     %d\n", n)
	}
}

func statusUsage() string {
	return `Usage: turnstile status KEY [flags]

Show whether the lock on KEY is held or free, and by whom: each holder's
lock kind, owner id, fencing token and the time its lease has left unless
renewed (a semaphore or read lock may have several holders); the last
fencing token the store issued for KEY; and how many owners wait in the
store's queues, where the store keeps them (on Redis, the waiters in the
line of --fair runs; plain runs that wait are not counted). Nothing in the
store changes.

The lock kinds of "turnstile run" (plain, --shared and --exclusive,
--semaphore, --fair) and the library's reentrant lock keep their holders
apart in the store. Without --kind, status looks at every kind the store
has and shows each that holds KEY; "free" means free in every kind. The
fair lock is the plain lock, shown as plain with its line's waiters.

Flags:
  --json         print one JSON object instead of text:
` + jsonStateHelp + `  --held         exit 1 if the lock is free (for scripts:
                 "if turnstile status --held KEY; then ...")
` + opFlagsHelp() + `
Exit status:
  0   the state was shown: the lock is held, or free (without --held)
  1   the lock is free (--held only)
  64  usage error: bad flag, missing or empty KEY, bad backend URL, a
      --kind the store does not have, or a store that cannot tell who
      holds a lock
  69  the lock store is unreachable or failing, refused the TLS handshake,
      the credentials or a permission (docs/security.md), or did not
      answer within --timeout
`
}
