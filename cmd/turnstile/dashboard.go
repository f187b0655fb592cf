package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/turnstilelock/turnstile/service"
)

// dashboardCmd implements "turnstile dashboard": the operator page of
// "turnstile serve" for a store no service runs over, served by an
// instance of the service on this machine that takes no locks itself.
func dashboardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := service.RunOptions{DrainTimeout: 5 * time.Second, PageOnly: true}
	help, err := newServiceFlags("dashboard", "127.0.0.1:7080", &o).parse(args, stdout, dashboardUsage)
	if help {
		return exitOK
	}
	if err == nil && o.Backend == "" {
		err = errors.New("--backend is required: the store whose locks to show")
	}
	if err != nil {
		return usageError(stderr, "dashboard", err)
	}
	return runService(ctx, "dashboard", o, stderr)
}

func dashboardUsage() string {
	return `Usage: turnstile dashboard --backend URL [--listen 127.0.0.1:7080] [--tokens FILE]

Serve the operator page of "turnstile serve" for a store no service runs
over: the locks held now (searchable by prefix), each key's history while
the page watches it, live charts of this process's metrics, and force
unlock. It is an instance of the service that takes no locks: every call
that takes, renews or releases one is refused; reads and force unlock
remain. Open the address it prints in a browser.

  turnstile dashboard --backend redis://127.0.0.1:6379

Flags:
  --backend URL    the store (default: $TURNSTILE_BACKEND)
  --backend-file FILE
                   read the --backend URL from FILE (its one line)
  --listen ADDR    where to serve (default 127.0.0.1:7080); an address other
                   hosts can reach needs --tokens
  --tokens FILE    require bearer tokens from FILE, as "turnstile serve"
                   does: a read token sees the page, an admin token may
                   force unlock

Exit status:
  0   stopped after SIGTERM or SIGINT
  64  usage error
  69  the lock store is unreachable, or serving failed
`
}
