package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/turnstilelock/turnstile"
)

// statusCmd implements "turnstile status".
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var o opFlags
	o.register(fs)
	asJSON := fs.Bool("json", false, "")
	held := fs.Bool("held", false, "")
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, statusUsage())
		return exitOK
	}
	if err == nil {
		err = o.resolve()
	}
	var key string
	if err == nil {
		key, err = checkKeyArg(pos)
	}
	if err != nil {
		return usageError(stderr, "status", err)
	}

	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
	defer cancel()
	c, code := o.openStore(ctx, "status", stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	st, err := c.Inspect(ctx, key)
	if err != nil {
		return o.storeError(stderr, "status", err)
	}
	if *asJSON {
		out, _ := json.Marshal(toJSON(st))
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		printState(stdout, st)
	}
	if *held && !st.Held {
		return exitFree
	}
	return exitOK
}

// exitFree is the exit status of "status --held" for a free lock, and of
// "unlock --force" for a lock nobody held.
const exitFree = 1

// printState shows st for people.
func printState(w io.Writer, st turnstile.LockState) {
	if !st.Held {
		fmt.Fprintf(w, "%s is free\n", oneLine(st.Key))
	} else {
		fmt.Fprintf(w, "%s is held\n", oneLine(st.Key))
		for _, h := range st.Holders {
			fmt.Fprintf(w, "  owner       %s\n  token       %d\n  ttl left    %s\n", oneLine(h.Owner), h.Token, ttlText(h.TTL))
		}
	}
	if st.Token > 0 {
		fmt.Fprintf(w, "  last token  %d\n", st.Token)
	}
	if st.Waiters >= 0 {
		fmt.Fprintf(w, "  waiters     %d\n", st.Waiters)
	}
}

func statusUsage() string {
	return `Usage: turnstile status KEY [flags]

Show whether the lock on KEY is held or free, and by whom: each holder's
owner id, fencing token and the time its lease has left unless renewed (a
semaphore or read lock may have several holders); the last fencing token
the store issued for KEY; and how many owners wait in the store's queue,
where the store keeps one. Nothing in the store changes.

Flags:
  --json         print one JSON object instead of text:
` + jsonStateHelp + `  --held         exit 1 if the lock is free (for scripts:
                 "if turnstile status --held KEY; then ...")
` + opFlagsHelp() + `
Exit status:
  0   the state was shown: the lock is held, or free (without --held)
  1   the lock is free (--held only)
  64  usage error: bad flag, missing or empty KEY, bad backend URL, or a
      store that cannot tell who holds a lock
  69  the lock store is unreachable or failing, refused the TLS handshake,
      the credentials or a permission (docs/security.md), or did not
      answer within --timeout
`
}
