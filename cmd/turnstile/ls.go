package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// lsCmd implements "turnstile ls".
func lsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o opFlags
	fs := o.flagSet("ls")
	prefix := fs.String("prefix", "", "")
	limit := fs.Int("limit", turnstile.DefaultListLimit, "")
	asJSON := fs.Bool("json", false, "")
	pos, help, err := o.parse(fs, args, stdout, lsUsage)
	if help {
		return exitOK
	}
	switch {
	case err != nil:
	case len(pos) > 0:
		err = fmt.Errorf("ls takes no arguments, got %s (use --prefix to narrow the list)", cli.QuoteArg(pos[0]))
	case *limit <= 0:
		err = fmt.Errorf("--limit %d must be positive", *limit)
	case len(*prefix) > turnstile.MaxKeyLen:
		err = fmt.Errorf("--prefix is %d bytes long, the limit is %d", len(*prefix), turnstile.MaxKeyLen)
	}
	if err != nil {
		return usageError(stderr, "ls", err)
	}

	ctx, ks, done, code := o.openBounded(ctx, "ls", stderr)
	if ks == nil {
		return code
	}
	defer done()
	found, more, err := ks.list(ctx, *prefix, *limit)
	if err != nil {
		return o.storeError(stderr, "ls", err)
	}
	keys, byKey := byKey(found)
	if len(keys) > *limit {
		keys, more = keys[:*limit], true
	}
	if *asJSON {
		out := struct {
			Locks []jsonState `json:"locks"`
			More  bool        `json:"more"`
		}{Locks: []jsonState{}, More: more}
		for _, k := range keys {
			out.Locks = append(out.Locks, toJSON(k, byKey[k]))
		}
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tOWNER\tTOKEN\tTTL LEFT\tWAITERS")
	for _, k := range keys {
		states := byKey[k]
		n := "-"
		if w := waiters(states); w >= 0 {
			n = fmt.Sprint(w)
		}
		for _, s := range states {
			for _, h := range s.st.Holders {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", oneLine(k), s.kind, oneLine(h.Owner), h.Token, ttlText(h.TTL), n)
			}
		}
	}
	_ = tw.Flush()
	if more {
		fmt.Fprintf(stderr, "turnstile ls: more locks are held than the %d shown; narrow --prefix or raise --limit\n", len(keys))
	}
	return exitOK
}

// byKey groups the held states found by key: the keys sorted, and each
// key's states in the order of the kinds.
func byKey(found []kindState) ([]string, map[string][]kindState) {
	m := map[string][]kindState{}
	var keys []string
	for _, s := range found {
		if !s.st.Held {
			continue
		}
		if _, ok := m[s.st.Key]; !ok {
			keys = append(keys, s.st.Key)
		}
		m[s.st.Key] = append(m[s.st.Key], s)
	}
	slices.Sort(keys)
	return keys, m
}

func lsUsage() string {
	return `Usage: turnstile ls [flags]

List the locks held now: one line per holder with the key, the lock kind
(plain, read-write, semaphore, reentrant), owner id, fencing token, the
time its lease has left unless renewed, and the number of waiters in the
store's queues ("-" where the store keeps none). Without --kind, ls lists
the locks of every kind the store has. Keys are sorted. When more keys are
held than --limit, ls shows --limit of them and says so on stderr. Nothing
in the store changes.

How it scales: ls looks at each kind in turn and stops once it has found
--limit locks of the kind, but how much of the store it reads to find them
depends on the store. On Redis it is a SCAN of the whole database (every
primary of a cluster), 1000 keys per round trip, matching the lock keys
under --prefix: O(keys in the database) in all for each kind (the
read-write lock's writers and readers are two), incremental, never
blocking the server for long. On etcd it reads only the range of keys
under --prefix, at most --limit of them for the plain lock, and the kinds'
directories under --prefix. On ZooKeeper it lists every key's directory
once per kind, then reads those under --prefix. Each backend's package
documentation says how its List scans.

Flags:
  --prefix P     only keys that start with P (default: every key)
  --limit N      show at most N locks (default ` + fmt.Sprint(turnstile.DefaultListLimit) + `)
  --json         print one JSON object instead of the table:
    {"locks": [LOCK, ...], "more": true|false}
  each LOCK being:
` + jsonStateHelp + opFlagsHelp() + `
Exit status:
  0   the list was shown (an empty list too)
  64  usage error: bad flag, --limit not positive, bad backend URL, a
      --kind the store does not have, or a store that cannot list its
      locks
  69  the lock store is unreachable or failing, refused the TLS handshake,
      the credentials or a permission (docs/security.md), or did not
      answer within --timeout
`
}
