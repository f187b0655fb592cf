package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
)

// TestKindClientsMemory: on the in-process store, which has every kind,
// the operator commands' kind clients find a key held in each kind,
// with its holders, list every kind's keys, count the fair line's
// waiters as the plain lock's, and remove one kind by force leaving the
// others; status shows each kind's holders.
func TestKindClientsMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := memory.New()
	_, ks := kindClientsOf(t, store)
	if names := kindNamesOf(ks); names != "plain,read-write,semaphore,reentrant" {
		t.Fatalf("kinds looked at: %s", names)
	}

	st, err := ks.inspect(ctx, "k")
	if err != nil || len(held(st)) != 0 || waiters(st) != 0 || lastToken(st) != 0 {
		t.Fatalf("inspect of a free key = %+v, %v; want nothing held, 0 waiters (the fair line)", st, err)
	}

	const ttl = time.Minute
	sem := locktest.View[*memory.Semaphore](t)(turnstile.Semaphore(store, 2))
	read, _ := locktest.Sides[*memory.ReadLock, *memory.WriteLock](t)(turnstile.ReadWrite(store))
	reentrant := locktest.View[*memory.Reentrant](t)(turnstile.Reentrant(store))
	for _, h := range []struct {
		b     driver.Backend
		key   string
		owner string
	}{
		{store, "k", "plain-owner"},
		{sem, "k", "permit-1"},
		{sem, "k", "permit-2"},
		{read, "r", "reader"},
		{reentrant, "re", "re-owner"},
	} {
		if _, ok, err := h.b.Acquire(ctx, h.key, h.owner, ttl); !ok || err != nil {
			t.Fatalf("%s of %s: %v, %v", h.owner, h.key, ok, err)
		}
	}
	fair := locktest.View[*memory.Fair](t)(turnstile.Fair(store))
	waited := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	defer func() { stop(); <-waited }()
	go func() {
		defer close(waited)
		_, _ = fair.AcquireWait(wctx, "k", "waiter", ttl)
	}()
	for fair.Waiting("k") != 1 {
		time.Sleep(time.Millisecond)
	}

	st, err = ks.inspect(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	hs := held(st)
	if len(hs) != 2 || hs[0].kind != "plain" || hs[1].kind != "semaphore" || len(hs[1].st.Holders) != 2 || waiters(st) != 1 {
		t.Fatalf("inspect = %+v; want plain (1 waiter) and semaphore (2 permits)", st)
	}
	var out bytes.Buffer
	printState(&out, "k", st, nil)
	for _, w := range []string{"k is held\n", "  kind        plain\n  owner       plain-owner\n", "  kind        semaphore\n  owner       permit-1\n",
		"  kind        semaphore\n  owner       permit-2\n", "  waiters     1\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("status does not say %q:\n%s", w, out.String())
		}
	}
	if js := toJSON("k", st); !js.Held || strings.Join(js.Kinds, ",") != "plain,semaphore" || len(js.Holders) != 3 || js.Holders[2].Kind != "semaphore" || js.Waiters != 1 {
		t.Errorf("JSON = %+v", js)
	}
	if kindList(hs, "or", "--kind ") != "--kind plain or --kind semaphore" {
		t.Errorf("kindList = %q", kindList(hs, "or", "--kind "))
	}

	found, more, err := ks.list(ctx, "", 10)
	keys, byKey := byKey(found)
	if err != nil || more || strings.Join(keys, ",") != "k,r,re" || len(byKey["k"]) != 2 || byKey["r"][0].kind != "read-write" || byKey["re"][0].kind != "reentrant" {
		t.Fatalf("list = %+v, %v, %v", found, more, err)
	}

	fr, err := ks.clients[2].ForceRelease(ctx, "k")
	if err != nil || !fr.Held || len(fr.Holders) != 2 {
		t.Fatalf("force release of the semaphore = %+v, %v", fr, err)
	}
	if st, err := ks.inspect(ctx, "k"); err != nil || len(held(st)) != 1 || held(st)[0].kind != "plain" {
		t.Fatalf("inspect after the semaphore went = %+v, %v; want the plain lock alone", st, err)
	}
}

// kindClientsOf returns a Client over b and the kind clients the
// operator commands open on it without --kind; both are closed when the
// test ends.
func kindClientsOf(t *testing.T, b driver.Backend) (*turnstile.Client, *kindClients) {
	t.Helper()
	c, err := turnstile.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ks, err := openKinds(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ks.close)
	return c, ks
}

// kindNamesOf lists the names of the kinds ks looks at.
func kindNamesOf(ks *kindClients) string {
	var names []string
	for _, k := range ks.kinds {
		names = append(names, k.name)
	}
	return strings.Join(names, ",")
}

// plainOnly is a store with the plain lock alone, which can be inspected.
type plainOnly struct {
	driver.Backend
	driver.Inspector
	driver.ForceReleaser
}

// TestKindClientsPlainStore: without --kind, a store that lacks the kinds
// is looked at for its plain lock (it has no waiters' queue: -1); a
// --kind it lacks is an error matching ErrUnsupported naming the kind;
// the kind names run's flags use name the kinds.
func TestKindClientsPlainStore(t *testing.T) {
	m := memory.New()
	c, ks := kindClientsOf(t, plainOnly{m, m, m})
	st, err := ks.inspect(context.Background(), "k")
	if err != nil || kindNamesOf(ks) != "plain" || len(st) != 1 || waiters(st) != -1 {
		t.Fatalf("kinds %s, inspect = %+v, %v; want the plain lock alone, no queue", kindNamesOf(ks), st, err)
	}
	for _, name := range []string{"semaphore", "fair", "shared", "reentrant"} {
		k, err := lookupKind(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = openKinds(c, &k)
		if !errors.Is(err, turnstile.ErrUnsupported) || !strings.Contains(err.Error(), "--kind "+k.name) {
			t.Errorf("--kind %s on a store without it: %v, want ErrUnsupported naming it", name, err)
		}
	}
	for name, want := range map[string]string{"shared": "read-write", "exclusive": "read-write", "read-write": "read-write", "fair": "fair", "plain": "plain"} {
		if k, err := lookupKind(name); err != nil || k.name != want {
			t.Errorf("lookupKind(%q) = %q, %v; want %q", name, k.name, err, want)
		}
	}
	if _, err := lookupKind("read"); err == nil {
		t.Error(`lookupKind("read"): no error`)
	}
}
