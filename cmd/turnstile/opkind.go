package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The operator commands see and clear every lock kind a store has on a
// key, not the plain lock alone: a held permit shown as "free" invites a
// second holder. The kinds live apart in the store (keys, nodes or rows
// of their own), so each is read and cleared through its view of the
// store; --kind names one, and without it the commands look at each.

// opKind is a lock kind as the operator commands name it.
type opKind struct {
	name string // as the output shows it
	// view returns the view of b that reads and clears the kind; an
	// error matching ErrUnsupported if b has no such kind.
	view func(b driver.Backend) (driver.Backend, error)
}

var (
	// plainKind is the plain lock, read through the store's fair view
	// where it has one: the same lock, with its line of waiters counted.
	plainKind = opKind{"plain", func(b driver.Backend) (driver.Backend, error) {
		v, err := turnstile.Fair(b)
		if errors.Is(err, turnstile.ErrUnsupported) {
			return b, nil
		}
		return v, err
	}}
	// fairKind is the plain lock as --fair waits for it: through the
	// fair view, which a store without a queue lacks.
	fairKind = opKind{"fair", func(b driver.Backend) (driver.Backend, error) { return turnstile.Fair(b) }}
	// readWriteKind is the read-write lock: both its sides see, and
	// clear, its readers and writer alike.
	readWriteKind = opKind{"read-write", func(b driver.Backend) (driver.Backend, error) {
		r, _, err := turnstile.ReadWrite(b)
		return r, err
	}}
	// semaphoreKind is the semaphore: a view of any number of permits
	// sees every permit of a key, whatever number they are held with.
	semaphoreKind = opKind{"semaphore", func(b driver.Backend) (driver.Backend, error) {
		return turnstile.Semaphore(b, 1)
	}}
	reentrantKind = opKind{"reentrant", func(b driver.Backend) (driver.Backend, error) { return turnstile.Reentrant(b) }}
)

// searchedKinds are the kinds the commands look at without --kind, in
// the order they show them. The fair lock is the plain lock.
var searchedKinds = []opKind{plainKind, readWriteKind, semaphoreKind, reentrantKind}

// kindNames are the names --kind takes: run's kind flags without their
// dashes (--shared and --exclusive are the two sides of one read-write
// lock) and the kinds' own names.
var kindNames = map[string]opKind{
	"plain":      plainKind,
	"fair":       fairKind,
	"shared":     readWriteKind,
	"exclusive":  readWriteKind,
	"read-write": readWriteKind,
	"semaphore":  semaphoreKind,
	"reentrant":  reentrantKind,
}

// kindNameList lists the names --kind takes, for messages and help.
const kindNameList = "plain, fair, shared, exclusive, read-write, semaphore or reentrant"

// lookupKind returns the kind --kind names.
func lookupKind(name string) (opKind, error) {
	if k, ok := kindNames[name]; ok {
		return k, nil
	}
	return opKind{}, fmt.Errorf("want a lock kind: %s", kindNameList)
}

// kindState is the state of a key in one lock kind.
type kindState struct {
	kind string
	st   turnstile.LockState
}

// kindClients are the Clients through which a command reads and clears
// the kinds it looks at: c for a kind whose view is c's store itself,
// one over the view for every other.
type kindClients struct {
	kinds   []opKind
	clients []*turnstile.Client
	own     []bool // whether the client is one of ours, to close
	// searching: no --kind named the kinds; each the store has is
	// looked at.
	searching bool
}

// openKinds returns the Clients of the kinds of c's store: the one kind
// --kind named (an error if the store lacks it), or each of
// searchedKinds the store has.
func openKinds(c *turnstile.Client, only *opKind) (*kindClients, error) {
	kinds := searchedKinds
	if only != nil {
		kinds = []opKind{*only}
	}
	ks := &kindClients{searching: only == nil}
	b := c.Backend()
	for _, k := range kinds {
		v, err := k.view(b)
		if errors.Is(err, turnstile.ErrUnsupported) && only == nil {
			continue // the store has no such kind: nothing can be held in it
		}
		if err != nil {
			ks.close()
			return nil, fmt.Errorf("--kind %s: %w", k.name, err)
		}
		kc, own := c, false
		if v != b {
			if kc, err = turnstile.New(v); err != nil {
				ks.close()
				return nil, err
			}
			own = true
		}
		ks.kinds, ks.clients, ks.own = append(ks.kinds, k), append(ks.clients, kc), append(ks.own, own)
	}
	return ks, nil
}

// close closes the Clients made over views; the views belong to the
// store, which the Client that opened it closes.
func (ks *kindClients) close() {
	for i, c := range ks.clients {
		if ks.own[i] {
			_ = c.Close()
		}
	}
}

// inspect returns key's state in each kind.
func (ks *kindClients) inspect(ctx context.Context, key string) ([]kindState, error) {
	out := make([]kindState, 0, len(ks.kinds))
	for i, k := range ks.kinds {
		st, err := ks.clients[i].Inspect(ctx, key)
		if err != nil {
			return nil, ks.failed(k, err)
		}
		out = append(out, kindState{k.name, st})
	}
	return out, nil
}

// list returns the locks held in each kind under prefix, at most limit
// per kind, and whether a kind has more.
func (ks *kindClients) list(ctx context.Context, prefix string, limit int) ([]kindState, bool, error) {
	var (
		out  []kindState
		more bool
	)
	for i, k := range ks.kinds {
		states, m, err := ks.clients[i].List(ctx, prefix, limit)
		if err != nil {
			return nil, false, ks.failed(k, err)
		}
		for _, st := range states {
			out = append(out, kindState{k.name, st})
		}
		more = more || m
	}
	return out, more, nil
}

// failed is err of a call on kind k. A store user that may read the
// plain lock but not a kind's holders (a SQL account without privileges
// on the kinds' table) learns what --kind plain does: looking for every
// kind, the command cannot call a key free that it may not see.
func (ks *kindClients) failed(k opKind, err error) error {
	if ks.searching && k.name != plainKind.name && errors.Is(err, turnstile.ErrPermission) {
		return fmt.Errorf("%w (while looking for %s locks, as every kind is looked at without --kind; --kind plain looks at the plain lock alone)", err, k.name)
	}
	return err
}

// held returns the kinds of states that are held.
func held(states []kindState) []kindState {
	var out []kindState
	for _, s := range states {
		if s.st.Held {
			out = append(out, s)
		}
	}
	return out
}

// kindList names the kinds of states, each after prefix, the last two
// joined by conj: "plain and semaphore", "--kind plain or --kind
// semaphore".
func kindList(states []kindState, conj, prefix string) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = prefix + s.kind
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// lastToken is the last token of a key over its kinds' states.
func lastToken(states []kindState) uint64 {
	var t uint64
	for _, s := range states {
		t = max(t, s.st.Token)
	}
	return t
}

// waiters is how many owners wait for a key in the queues of its kinds'
// states, or -1 if none of them keeps a queue it can count.
func waiters(states []kindState) int {
	n := -1
	for _, s := range states {
		if s.st.Waiters >= 0 {
			n = max(n, 0) + s.st.Waiters
		}
	}
	return n
}
