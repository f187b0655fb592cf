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
// turnstile_holds whose column kind is Kind, one per holder, each expiring
// on the server's clock at the end of its lease. No session lock is taken,
// so a kind's lease holds exactly as long as its row lives, as on the
// stores that have only TTLs. The kinds' locks are apart from the plain
// lock's: a plain lock and a reentrant lock on one key do not exclude
// each other, but they share the key's fencing tokens.
type Spec struct {
	Kind    string        // reentrant, semaphore, read or write
	Permits int           // a semaphore's number of permits
	Claim   time.Duration // how long a waiting writer's claim keeps readers out
	Several bool          // several owners hold a key at once (driver.Shared)
	Label   string        // the view's name after the store's
	Store   string        // the store's name (driver.Namer)
}

// Name implements driver.Namer for the view that embeds s.
func (s Spec) Name() string { return s.Store + " " + s.Label }

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

// Views makes a SQL store's view of one lock kind. A store's Backend
// embeds it, so the kinds' constructors — and what they promise — are
// one piece of code for both stores.
type Views func(Spec) driver.Backend

// ReentrantView implements driver.Reentranter: a lock that the owner
// holding it may take again, and holds until it released it as often.
// Every re-entry returns the token of the first acquisition and renews
// the hold to at least its TTL.
func (v Views) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return v(Reentrant()), nil
}

// SemaphoreView implements driver.Semaphorer: up to cfg.Permits owners
// hold a key at once, each lease one permit with a token of its own. The
// number is stored in every holder's row; while a permit of the key is
// held, an acquisition with another number is refused
// (turnstile.ErrInvalidOption).
func (v Views) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return v(Semaphore(cfg)), nil
}

// ReadWriteView implements driver.ReadWriter: the two sides of a
// read-write lock, any number of readers or one writer. Writers are
// preferred: a writer that finds the key held leaves a claim, and while a
// claim is live no new reader gets in, so a stream of readers cannot
// starve writers. A claim lasts cfg.Claim() after the writer's last
// attempt, so a writer that gave up blocks new readers for at most that
// long. The read side is driver.Shared.
func (v Views) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	r, w := ReadWrite(cfg)
	return v(r), v(w), nil
}

// AddRow adds a row of a query over the kinds' holders, whose rows come
// in key order, to states: a state for key, with the key's last token
// and no queue (Waiters -1), when the last state is another key's; and
// h as a holder of it when live (a holder's row that had time left).
func AddRow(states []driver.LockState, key string, last uint64, h driver.Holder, live bool) []driver.LockState {
	if len(states) == 0 || states[len(states)-1].Key != key {
		states = append(states, driver.LockState{Key: key, Token: last, Waiters: -1})
	}
	if live {
		st := &states[len(states)-1]
		st.Held = true
		st.Holders = append(st.Holders, h)
	}
	return states
}
