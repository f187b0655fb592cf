package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/service"
)

// serveCmd implements "turnstile serve": the lock service over a store.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "token" {
		return serveTokenCmd(args[1:], stdout, stderr)
	}
	o := service.RunOptions{DrainTimeout: 30 * time.Second}
	sf := newServiceFlags("serve", "127.0.0.1:7070", &o)
	fs := sf.fs
	fs.StringVar(&o.TLS.CertFile, "cert-file", "", "")
	fs.StringVar(&o.TLS.KeyFile, "key-file", "", "")
	fs.StringVar(&o.TLS.ClientCAFile, "ca-file", "", "")
	fs.BoolVar(&o.Insecure, "insecure", false, "")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "")
	fs.BoolVar(&o.NoDashboard, "no-dashboard", false, "")
	fs.StringVar(&o.Config.Instance, "instance", "", "")
	ttl := durationFlag(service.DefaultTTL)
	fs.Var(&ttl, "ttl", "")
	maxWait := durationFlag(service.DefaultMaxWait)
	fs.Var(&maxWait, "max-wait", "")
	drain := durationFlag(o.DrainTimeout)
	fs.Var(&drain, "drain-timeout", "")
	fs.IntVar(&o.Config.MaxStreamsPerConn, "max-streams-per-conn", service.DefaultMaxStreamsPerConn, "")
	fs.IntVar(&o.Config.MaxHolds, "max-holds", service.DefaultMaxHolds, "")
	help, err := sf.parse(args, stdout, serveUsage)
	if help {
		return exitOK
	}
	if err == nil {
		o.Config.TTL, o.Config.MaxWait, o.DrainTimeout = time.Duration(ttl), time.Duration(maxWait), time.Duration(drain)
		err = checkServeFlags(o)
	}
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	return runService(ctx, "serve", o, stderr)
}

// serviceFlags are the flags of a command that runs the service (serve,
// dashboard): --backend, --backend-file, --listen and --tokens, into o,
// and those the command adds to fs.
type serviceFlags struct {
	fs      *flag.FlagSet
	backend cli.BackendFlags
	o       *service.RunOptions
}

// newServiceFlags registers the shared flags on a new flag set for
// command name, with listen as --listen's default.
func newServiceFlags(name, listen string, o *service.RunOptions) *serviceFlags {
	f := &serviceFlags{fs: cli.NewFlagSet(name), o: o}
	f.backend.Register(f.fs, "backend")
	f.fs.StringVar(&o.Listen, "listen", listen, "")
	f.fs.StringVar(&o.TokensFile, "tokens", "", "")
	return f
}

// parse parses args, which hold flags only, as parseOrHelp does, and
// sets o.Backend to the URL of the store they name.
func (f *serviceFlags) parse(args []string, stdout io.Writer, usage func() string) (help bool, err error) {
	pos, help, err := parseOrHelp(f.fs, args, stdout, usage)
	if err == nil && !help && len(pos) > 0 {
		err = fmt.Errorf("unexpected argument %q", pos[0])
	}
	if err == nil && !help {
		f.o.Backend, _, err = f.backend.Resolve(os.Getenv)
	}
	return help, err
}

func checkServeFlags(o service.RunOptions) error {
	switch {
	case o.Config.TTL < 200*time.Millisecond || o.Config.TTL > 24*time.Hour:
		return fmt.Errorf("--ttl %v is not in [200ms, 24h]", o.Config.TTL)
	case o.Config.MaxWait <= 0:
		return fmt.Errorf("--max-wait %v must be positive", o.Config.MaxWait)
	case o.DrainTimeout <= 0:
		return fmt.Errorf("--drain-timeout %v must be positive", o.DrainTimeout)
	case o.Config.MaxStreamsPerConn < 1:
		return fmt.Errorf("--max-streams-per-conn %d must be at least 1", o.Config.MaxStreamsPerConn)
	case o.Config.MaxHolds < 1:
		return fmt.Errorf("--max-holds %d must be at least 1", o.Config.MaxHolds)
	}
	return nil
}

// serveTokenCmd implements "turnstile serve token": a new bearer token.
func serveTokenCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("serve token")
	role := fs.String("role", "lock", "")
	var prefixes stringsFlag
	fs.Var(&prefixes, "prefix", "")
	pos, help, err := parseOrHelp(fs, args, stdout, serveUsage)
	if help {
		return exitOK
	}
	if err == nil && len(pos) != 1 {
		err = errors.New("want one NAME: turnstile serve token NAME --prefix P [--prefix P2] [--role read|lock|admin]")
	}
	var bearer, line string
	if err == nil {
		bearer, line, err = service.NewToken(pos[0], *role, prefixes)
	}
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	fmt.Fprintf(stdout, "# the token, for the client (Authorization: Bearer TOKEN, or turnstile://%s:SECRET@host); it is not stored anywhere:\n%s\n", pos[0], bearer)
	fmt.Fprintf(stdout, "# the line for the --tokens file (then send the instances SIGHUP):\n%s\n", line)
	return exitOK
}

// stringsFlag is a flag given any number of times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func serveUsage() string {
	return `Usage: turnstile serve [flags]
       turnstile serve token NAME --prefix P [--prefix P2 ...] [--role read|lock|admin]

Serve the turnstile lock service over a store: the same API as gRPC,
gRPC-Web and Connect (JSON or binary over HTTP/1.1 and HTTP/2), defined in
proto/turnstile/v1. The service keeps no state of its own: every lease is
in the store, and any instance serves any call, so run as many as you
like behind any load balancer, over one store. docs/service.md has the
API, curl examples, and how to deploy and size it.

  curl -H 'Content-Type: application/json' -d '{"key":"k"}' \
      http://127.0.0.1:7070/turnstile.v1.Locks/TryAcquire

Go programs and "turnstile run" use it as a store:
--backend turnstile://host1:7070,host2:7070 (turnstiles:// with TLS).

Flags:
  --backend URL    the store (default: $TURNSTILE_BACKEND, else mem://, which
                   lives in this process: one instance only). Any scheme:
                   redis://, redis+sentinel://, redlock://, etcd://,
                   zookeeper://, postgres://, mysql://, fallback://
  --backend-file FILE
                   read the --backend URL from FILE (its one line)
  --listen ADDR    where to serve (default 127.0.0.1:7070)
  --cert-file FILE, --key-file FILE
                   serve TLS with this certificate and key (read again on
                   SIGHUP)
  --ca-file FILE   require client certificates signed by these authorities
  --tokens FILE    require bearer tokens from FILE (read again on SIGHUP):
                   one line per token, "turnstile serve token" makes them;
                   each token has a role (read, lock, admin), key prefixes
                   and a rate limit (docs/service.md)
  --insecure       serve an address other hosts can reach without TLS or
                   tokens (refused otherwise: anyone could release any lock)
  --ttl D          the lease TTL of a request that names none (default 30s)
  --max-wait D     the longest a call waits for a lock (default 5m)
  --instance ID    the first part of the owner ids this instance makes
                   (default: host name and process id)
  --max-streams-per-conn N
                   streams one connection may have open (default 1000)
  --max-holds N    Hold and Campaign streams this instance keeps leases for
                   (default 100000)
  --drain-timeout D
                   on SIGTERM or SIGINT the instance drains: new calls are
                   refused (UNAVAILABLE, DRAINING), held streams are told
                   and their leases no longer renewed (clients resume them
                   on another instance); calls in progress get D to end
                   (default 30s)
  --metrics-addr ADDR
                   serve Prometheus metrics at http://ADDR/metrics ("same":
                   at /metrics of --listen)
  --no-dashboard   do not serve the operator page at / (the locks held,
                   their history, live charts, force unlock for an admin
                   token)

serve token prints a new token for the client and the line for the tokens
file; the secret is not kept anywhere else.

Exit status:
  0   drained and stopped after SIGTERM or SIGINT
  64  usage error: bad flag, file, address, or a network address without
      TLS or tokens
  69  the lock store is unreachable, or serving failed
`
}

// runService runs the service of command name (serve, dashboard) until
// ctx ends or SIGINT or SIGTERM comes, and returns its exit code.
func runService(ctx context.Context, name string, o service.RunOptions, stderr io.Writer) int {
	o.Config.Version = readBuildInfo().Version

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stop := cli.CancelOnSignal(sigs, cancel)
	defer stop()

	err := service.Run(ctx, o, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, service.ErrUsage):
		return usageError(stderr, name, err)
	case errors.Is(err, service.ErrStore):
		fmt.Fprintf(stderr, "turnstile %s: %s\n%s", name, oneLine(describe(err)), storeHint(err))
		return exitUnavailable
	}
	fmt.Fprintf(stderr, "turnstile %s: %s\n", name, oneLine(describe(err)))
	return exitUnavailable
}
