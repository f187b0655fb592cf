package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
)

// The confirmation prompt of unlock reads stdin, if it is a terminal;
// tests replace both.
var (
	confirmIn       io.Reader = os.Stdin
	stdinIsTerminal           = stdinTerminal
)

// unlockCmd implements "turnstile unlock".
func unlockCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o opFlags
	fs := o.flagSet("unlock")
	force := fs.Bool("force", false, "")
	yes := fs.Bool("yes", false, "")
	key, help, err := o.parseKey(fs, args, stdout, unlockUsage)
	if help {
		return exitOK
	}
	switch {
	case err != nil:
	case !*force:
		err = errors.New("unlock removes a lock whoever holds it, and its holder may still be working: pass --force to do that")
	case !*yes && !stdinIsTerminal():
		err = errors.New("stdin is not a terminal, so there is nobody to confirm: pass --yes to unlock without asking")
	}
	if err != nil {
		return usageError(stderr, "unlock", err)
	}

	// The prompt waits for a person; only the store's calls are bounded.
	c, ks, code := func() (*turnstile.Client, *kindClients, int) {
		octx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
		defer cancel()
		return o.openStore(octx, "unlock", stderr)
	}()
	if c == nil {
		return code
	}
	defer c.Close()
	defer ks.close()
	// One kind named and no question to ask: one call. Otherwise the
	// kinds are read first, to find the one that holds KEY and to show
	// its holders.
	target, known := 0, false
	var st turnstile.LockState
	if o.kind == nil || !*yes {
		ictx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
		states, err := ks.inspect(ictx, key)
		cancel()
		switch {
		case err != nil && (o.kind == nil || !errors.Is(err, turnstile.ErrUnsupported)):
			return o.storeError(stderr, "unlock", err)
		case err == nil:
			hs := held(states)
			if len(hs) == 0 {
				fmt.Fprintf(stderr, "turnstile unlock: %s was not held\n", oneLine(key))
				return exitFree
			}
			if len(hs) > 1 {
				return usageError(stderr, "unlock", fmt.Errorf("%s is held in more than one lock kind (%s): pass %s to say which to remove",
					oneLine(key), kindList(hs, "and", ""), kindList(hs, "or", "--kind ")))
			}
			for i, k := range ks.kinds {
				if k.name == hs[0].kind {
					target = i
				}
			}
			st, known = hs[0].st, true
		}
	}
	kind := ks.kinds[target].name
	if !*yes && !confirm(stderr, key, kind, st, known) {
		fmt.Fprintln(stderr, "turnstile unlock: not confirmed; nothing removed")
		return exitFree
	}
	fctx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
	defer cancel()
	st, err = ks.clients[target].ForceRelease(fctx, key)
	if err != nil {
		return o.storeError(stderr, "unlock", err)
	}
	if !st.Held {
		fmt.Fprintf(stderr, "turnstile unlock: %s was not held\n", oneLine(key))
		return exitFree
	}
	fmt.Fprintf(stdout, "removed the lock on %s\n  kind              %s\n", oneLine(key), kind)
	for _, h := range st.Holders {
		fmt.Fprintf(stdout, "  owner             %s\n  token             %d\n", oneLine(h.Owner), h.Token)
	}
	fmt.Fprintf(stdout, "  new fence floor   %d (every later token is greater)\n", st.Token)
	return exitOK
}

// confirm asks on stderr whether to remove key's lock of kind, described
// by st if known, and reads the answer from confirmIn.
func confirm(stderr io.Writer, key, kind string, st turnstile.LockState, known bool) bool {
	var who []string
	if known {
		for _, h := range st.Holders {
			who = append(who, fmt.Sprintf("%s (token %d, %s left)", oneLine(h.Owner), h.Token, ttlText(h.TTL)))
		}
	}
	if len(who) > 0 {
		fmt.Fprintf(stderr, "Remove the %s lock on %s, held by %s? Its holder may still be working. [y/N] ", kind, oneLine(key), strings.Join(who, ", "))
	} else {
		fmt.Fprintf(stderr, "Remove the %s lock on %s, whoever holds it? Its holder may still be working. [y/N] ", kind, oneLine(key))
	}
	line, _ := bufio.NewReader(confirmIn).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func unlockUsage() string {
	return `Usage: turnstile unlock KEY --force [--yes] [flags]

Remove the lock on KEY whoever holds it: an operator's way out of a lock
that is stuck (its holder hangs while its lease is renewed, or the lease is
long and its holder is gone). Without --kind, unlock removes the lock of
whatever kind holds KEY (every permit of a semaphore, every reader or the
writer of a read-write lock), and refuses (exit 64), naming the kinds,
when KEY is held in more than one. In the same atomic step where the store
allows, the key's fence is raised first: every token issued later for KEY
is greater than the "new fence floor" unlock prints, which is at least the
removed holder's token, so fenced storage refuses the removed holder's late
writes once the next holder has written (on Redis, the guard key of
package fence for KEY is raised at once). Waiters are woken as on a
release. The removed holder learns it at its next renewal (within a third
of its TTL): a "turnstile run" holding it stops its command and exits 79.

The removal is logged, counted in the metrics and visible in lock events
of the Client that does it (event FORCE_RELEASED).

Without --yes, unlock shows the holders and asks for confirmation on the
terminal; when stdin is not a terminal it refuses (exit 64) unless --yes
is given.

Flags:
  --force        required: say that you mean to remove someone's lock
  --yes          do not ask for confirmation
` + opFlagsHelp() + `
Exit status:
  0   the lock was removed; stdout names its kind, the removed owners and
      tokens, and the new fence floor
  1   KEY was not held (nothing was removed), or the removal was not
      confirmed
  64  usage error: bad flag, missing or empty KEY, no --force, no --yes with
      stdin not a terminal, bad backend URL, a --kind the store does not
      have, KEY held in more than one kind without --kind, or a store that
      cannot remove a lock by force
  69  the lock store is unreachable or failing, refused the TLS handshake,
      the credentials or a permission (docs/security.md), or did not
      answer within --timeout
`
}
