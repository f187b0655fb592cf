package workload

import (
	"context"
	"fmt"

	"github.com/turnstilelock/turnstile"
)

// TurnstileOn is turnstile on a store other than Redis as its users run
// it, for the cells that set it beside the store's own lock recipe:
// opened by URL (url of the store's one address, a scheme that the
// program has registered) at its defaults, which defaults names for the
// report, with TTL and DefaultBackoff, as Turnstile on Redis. One Client
// serves every worker of a cell; it hands out fencing tokens on every
// store, as always.
func TurnstileOn(store, defaults string, url func(addr string) string) Library {
	return Library{
		Name:     "turnstile",
		Settings: fmt.Sprintf("turnstile (%s): its defaults (%s) with TTL %v and backoff %v…%v without a retry limit, one Client per cell", store, defaults, TTL, DefaultBackoff.Base, DefaultBackoff.Cap),
		Open: func(ctx context.Context, addrs []string, _ int) (Locker, error) {
			if len(addrs) != 1 {
				return nil, fmt.Errorf("%w: turnstile on %s takes one address, not %d", ErrUsage, store, len(addrs))
			}
			return OpenTurnstile(ctx, url(addrs[0]), turnstile.WithBackoff(DefaultBackoff))
		},
	}
}
