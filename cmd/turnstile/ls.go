package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// lsCmd implements "turnstile ls".
func lsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var o opFlags
	o.register(fs)
	prefix := fs.String("prefix", "", "")
	limit := fs.Int("limit", turnstile.DefaultListLimit, "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, lsUsage())
		return exitOK
	}
	if err == nil {
		err = o.resolve()
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

	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
	defer cancel()
	c, code := o.openStore(ctx, "ls", stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	states, more, err := c.List(ctx, *prefix, *limit)
	if err != nil {
		return o.storeError(stderr, "ls", err)
	}
	slices.SortFunc(states, func(a, b turnstile.LockState) int { return strings.Compare(a.Key, b.Key) })
	if *asJSON {
		out := struct {
			Locks []jsonState `json:"locks"`
			More  bool        `json:"more"`
		}{Locks: []jsonState{}, More: more}
		for _, st := range states {
			out.Locks = append(out.Locks, toJSON(st))
		}
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tOWNER\tTOKEN\tTTL LEFT\tWAITERS")
	for _, st := range states {
		waiters := "-"
		if st.Waiters >= 0 {
			waiters = fmt.Sprint(st.Waiters)
		}
		for _, h := range st.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", oneLine(st.Key), oneLine(h.Owner), h.Token, ttlText(h.TTL), waiters)
		}
	}
	_ = tw.Flush()
	if more {
		fmt.Fprintf(stderr, "turnstile ls: more locks are held than the %d shown; narrow --prefix or raise --limit\n", len(states))
	}
	return exitOK
}

func lsUsage() string {
	return `Usage: turnstile ls [flags]

List the locks held now: one line per holder with the key, owner id,
fencing token, the time its lease has left unless renewed, and the number
of waiters in the store's queue ("-" where the store keeps none). Keys are
sorted. When more locks are held than --limit, ls shows --limit of them and
says so on stderr. Nothing in the store changes.

How it scales: ls stops once it has found --limit locks, but how much of
the store it reads to find them depends on the store. On Redis it is a SCAN
of the whole database (every primary of a cluster), 1000 keys per round
trip, matching the lock keys under --prefix: O(keys in the database) in
all, incremental, never blocking the server for long. On etcd it reads
only the range of keys under --prefix, at most --limit of them. On
ZooKeeper it lists every key's directory once, then reads those under
--prefix. Each backend's package documentation says how its List scans.

Flags:
  --prefix P     only keys that start with P (default: every key)
  --limit N      show at most N locks (default ` + fmt.Sprint(turnstile.DefaultListLimit) + `)
  --json         print one JSON object instead of the table:
    {"locks": [LOCK, ...], "more": true|false}
  each LOCK being:
` + jsonStateHelp + opFlagsHelp() + `
Exit status:
  0   the list was shown (an empty list too)
  64  usage error: bad flag, --limit not positive, bad backend URL, or a
      store that cannot list its locks
  69  the lock store is unreachable or failing, refused the TLS handshake,
      the credentials or a permission (docs/security.md), or did not
      answer within --timeout
`
}
