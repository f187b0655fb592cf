package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// The operator commands — status, ls and unlock — share their store
// flags and the way they open it and report its failures.

// defaultOpTimeout bounds an operator command: connecting and its round
// trips.
const defaultOpTimeout = 10 * time.Second

// opFlags are the flags every operator command takes.
type opFlags struct {
	backend cli.BackendFlags
	timeout durationFlag
	kind    *opKind // --kind; nil: every kind
	url     string  // resolved by resolve
	from    string  // where url came from; "" for defaultBackend
}

func (o *opFlags) register(fs *flag.FlagSet) {
	o.backend.Register(fs, "backend")
	o.timeout = durationFlag(defaultOpTimeout)
	fs.Var(&o.timeout, "timeout", "")
	fs.Var(kindFlag{&o.kind}, "kind", "")
}

// flagSet returns the flags of operator command name, with o's
// registered.
func (o *opFlags) flagSet(name string) *flag.FlagSet {
	fs := cli.NewFlagSet(name)
	o.register(fs)
	return fs
}

// parse parses args with fs, as parseArgs does, and resolves o. help
// reports that -h asked for the usage, which it has written to stdout.
func (o *opFlags) parse(fs *flag.FlagSet, args []string, stdout io.Writer, usage func() string) (pos []string, help bool, err error) {
	pos, help, err = parseOrHelp(fs, args, stdout, usage)
	if err == nil && !help {
		err = o.resolve()
	}
	return pos, help, err
}

// parseKey is parse for a command that takes one argument, KEY, which it
// checks and returns.
func (o *opFlags) parseKey(fs *flag.FlagSet, args []string, stdout io.Writer, usage func() string) (key string, help bool, err error) {
	pos, help, err := o.parse(fs, args, stdout, usage)
	if err == nil && !help {
		key, err = checkKeyArg(pos)
	}
	return key, help, err
}

// kindFlag is --kind: a lock kind's name.
type kindFlag struct{ k **opKind }

func (f kindFlag) String() string {
	if f.k == nil || *f.k == nil {
		return ""
	}
	return (*f.k).name
}

func (f kindFlag) Set(s string) error {
	k, err := lookupKind(s)
	if err != nil {
		return err
	}
	*f.k = &k
	return nil
}

// resolve finds the store's URL and checks the flags.
func (o *opFlags) resolve() error {
	b, from, err := o.backend.Resolve(os.Getenv)
	if err != nil {
		return err
	}
	if b == "" {
		b = defaultBackend
	}
	o.url, o.from = b, from
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %v must be positive", time.Duration(o.timeout))
	}
	return nil
}

// opFlagsHelp describes the flags of opFlags, for the commands' help.
func opFlagsHelp() string {
	return fmt.Sprintf(`  --kind K       look at one lock kind only: plain, fair, shared,
                 exclusive, read-write, semaphore or reentrant (default:
                 every kind the store has). shared and exclusive, as
                 run's flags name them, both name the read-write lock;
                 fair is the plain lock through the store's line of
                 waiters (without --kind it shows as plain)
  --backend URL  the lock store (default: $TURNSTILE_BACKEND, else
                 %s). Schemes: %s.
                 Keep a URL with a password in $TURNSTILE_BACKEND or
                 --backend-file: every local user can read a command line.
  --backend-file FILE
                 read the --backend URL from FILE (its one line)
  --timeout D    give up with exit 69 if the store has not answered within
                 D, connecting included (default %v)
`, defaultBackend, strings.Join(turnstile.Schemes(), ", "), defaultOpTimeout)
}

// parseArgs parses args with fs, letting flags come before and after the
// positional arguments ("turnstile status KEY --json"), and returns the
// positional ones. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseOrHelp parses args with fs as parseArgs does. help reports that
// -h asked for the usage, which it has written to stdout.
func parseOrHelp(fs *flag.FlagSet, args []string, stdout io.Writer, usage func() string) (pos []string, help bool, err error) {
	pos, err = parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage())
		return nil, true, nil
	}
	return pos, false, err
}

// checkKeyArg checks the KEY argument of status and unlock.
func checkKeyArg(pos []string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", errors.New("missing KEY: the lock's key, e.g. lock:report:daily")
	case len(pos) > 1:
		return "", fmt.Errorf("one KEY only; also got %s", cli.QuoteArg(pos[1]))
	case pos[0] == "":
		return "", errors.New("KEY must not be empty")
	case len(pos[0]) > turnstile.MaxKeyLen:
		return "", fmt.Errorf("KEY is %d bytes long, the limit is %d", len(pos[0]), turnstile.MaxKeyLen)
	}
	return pos[0], nil
}

// usageError reports a usage error of command name on one line, with
// the hint on the next, and returns exitUsage.
func usageError(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "turnstile %s: %s\nRun \"turnstile %s -h\" for usage.\n", name, oneLine(cli.Scrub(describe(err))), name)
	return exitUsage
}

// oneLine escapes the control characters of msg (a flag name given with
// a newline in it, say), so that a message stays on one line.
func oneLine(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// openStore opens the store of o for command name, and the Clients of
// the kinds it looks at. On failure it has said why on stderr and
// returns the exit code.
func (o *opFlags) openStore(ctx context.Context, name string, stderr io.Writer) (*turnstile.Client, *kindClients, int) {
	c, err := turnstile.Open(ctx, o.url)
	if err != nil {
		return nil, nil, o.storeError(stderr, name, cli.HideURL(err, o.url))
	}
	ks, err := openKinds(c, o.kind)
	if err != nil {
		_ = c.Close()
		return nil, nil, o.storeError(stderr, name, err)
	}
	return c, ks, exitOK
}

// openBounded is openStore under a context that --timeout bounds from
// now, which it returns for the command's calls, with the function that
// closes what it opened and cancels the context. On failure ks is nil.
func (o *opFlags) openBounded(ctx context.Context, name string, stderr io.Writer) (_ context.Context, ks *kindClients, done func(), code int) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.timeout))
	c, ks, code := o.openStore(ctx, name, stderr)
	if c == nil {
		cancel()
		return ctx, nil, nil, code
	}
	return ctx, ks, func() {
		ks.close()
		_ = c.Close()
		cancel()
	}, exitOK
}

// storeError is the package's storeError, saying also, for a store that
// failed, that it was the default one if no flag or variable named it.
func (o *opFlags) storeError(stderr io.Writer, name string, err error) int {
	code := storeError(stderr, name, err)
	if code == exitUnavailable {
		fmt.Fprint(stderr, defaultStoreNote(name, o.from))
	}
	return code
}

// storeError reports a failed call on the store and returns the exit
// code: 64 for a URL or backend that cannot do this at all, 69 for a
// store that is unreachable, failing or slow.
func storeError(stderr io.Writer, name string, err error) int {
	switch {
	case errors.Is(err, turnstile.ErrUnknownScheme), errors.Is(err, turnstile.ErrInvalidURL),
		errors.Is(err, turnstile.ErrInvalidKey), errors.Is(err, turnstile.ErrInvalidOption),
		errors.Is(err, turnstile.ErrUnsupported):
		return usageError(stderr, name, err)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "turnstile %s: lock store unavailable: no answer within --timeout: %s\n", name, oneLine(describe(err)))
		return exitUnavailable
	}
	// The library names the store in err with any password masked; the
	// URL itself would show it in the clear.
	fmt.Fprintf(stderr, "turnstile %s: lock store unavailable: %s\n%s", name, oneLine(describe(err)), storeHint(err))
	return exitUnavailable
}

// ttlText renders a holder's time left for people.
func ttlText(d time.Duration) string {
	if d < 0 {
		return "session"
	}
	return d.Round(time.Millisecond).String()
}

// jsonHolder is a holder as the commands' JSON shows it.
type jsonHolder struct {
	Kind  string `json:"kind"`
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	TTLMs int64  `json:"ttl_ms"` // -1: bounded by a session, not a deadline
}

// jsonState is a key's state in the kinds looked at, as the commands'
// JSON shows it.
type jsonState struct {
	Key     string       `json:"key"`
	Held    bool         `json:"held"`
	Kinds   []string     `json:"kinds"`
	Holders []jsonHolder `json:"holders"`
	Token   uint64       `json:"token"`
	Waiters int          `json:"waiters"` // -1: no kind keeps a queue it can count
}

// toJSON is key's state in the kinds of states.
func toJSON(key string, states []kindState) jsonState {
	js := jsonState{Key: key, Kinds: []string{}, Holders: []jsonHolder{}, Token: lastToken(states), Waiters: waiters(states)}
	for _, s := range held(states) {
		js.Held = true
		js.Kinds = append(js.Kinds, s.kind)
		for _, h := range s.st.Holders {
			ms := int64(-1)
			if h.TTL >= 0 {
				ms = h.TTL.Milliseconds()
			}
			js.Holders = append(js.Holders, jsonHolder{Kind: s.kind, Owner: h.Owner, Token: h.Token, TTLMs: ms})
		}
	}
	return js
}

// jsonStateHelp documents jsonState for the commands' help.
const jsonStateHelp = `    {"key": KEY, "held": true|false, "kinds": [KIND, ...],
     "holders": [{"kind": KIND, "owner": ID, "token": N, "ttl_ms": MS}, ...],
     "token": N, "waiters": N}
  kinds are the lock kinds KEY is held in (plain, fair, read-write,
  semaphore, reentrant), [] when it is free; holders is [] when it is
  free; ttl_ms is the time left before the lease expires unless renewed
  (-1: bounded by a session, as on ZooKeeper); token is the last fencing
  token the store issued for the key (0: none, or the store cannot tell;
  a holder's 0: the store keeps no token per holder, as for Redis's
  semaphore permits and readers); waiters is how many owners wait in the
  store's queues for the key (-1: the store keeps no queue it can count).
  Fields may be added, never renamed or removed.
`
