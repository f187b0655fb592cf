// Package sqlkinds is what the SQL stores (postgres, mysql) share of
// their lock kinds: the kinds' descriptions and the checks of a call's
// arguments. Each store keeps its own SQL; the dialect is the only
// difference between them.
package sqlkinds

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Spec is one lock kind of a SQL store: its holders are rows of table
// turnstile_holds whose column kind is Kind.
type Spec struct {
	Kind    string        // reentrant, semaphore, read or write
	Permits int           // a semaphore's number of permits
	Claim   time.Duration // how long a waiting writer's claim keeps readers out
	Several bool          // several owners hold a key at once (driver.Shared)
	Label   string        // the view's name after the store's
}

// Shared implements driver.Shared for the view that embeds s: semaphores
// of more than one permit and the read side have several holders, so a
// Client lets its waiters contend on their own.
func (s Spec) Shared() bool { return s.Several }

// Reentrant is the kind of driver.Reentranter's view.
func Reentrant() Spec { return Spec{Kind: "reentrant", Label: "reentrant"} }

// Semaphore is the kind of driver.Semaphorer's view of cfg.Permits
// permits.
func Semaphore(cfg driver.KindConfig) Spec {
	return Spec{Kind: "semaphore", Permits: cfg.Permits, Several: cfg.Permits > 1, Label: fmt.Sprintf("semaphore(%d)", cfg.Permits)}
}

// ReadWrite are the kinds of driver.ReadWriter's two sides.
func ReadWrite(cfg driver.KindConfig) (read, write Spec) {
	claim := cfg.Claim()
	return Spec{Kind: "read", Claim: claim, Several: true, Label: "read"},
		Spec{Kind: "write", Claim: claim, Label: "write"}
}

// CheckOwner checks a call on key by owner before it reaches the store
// named store.
func CheckOwner(ctx context.Context, store, key, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if key == "" || owner == "" {
		return fmt.Errorf("%w: %s: empty key or owner", turnstile.ErrInvalidKey, store)
	}
	return nil
}

// CheckLease is CheckOwner for a call that sets a TTL, which must be at
// least min, the store's precision.
func CheckLease(ctx context.Context, store, key, owner string, ttl, min time.Duration) error {
	if err := CheckOwner(ctx, store, key, owner); err != nil {
		return err
	}
	if ttl < min {
		return fmt.Errorf("%w: %s: TTL %v is under %v", turnstile.ErrInvalidOption, store, ttl, min)
	}
	return nil
}
