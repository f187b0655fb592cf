package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// worker is one goroutine of a run, doing operations at random on its
// Client.
type worker struct {
	w     *world
	id    int
	ci    int // its Client
	c     *turnstile.Client
	ch    chooser
	ctx   context.Context // the run's, carrying ch for the store's faults
	owner string          // its fixed owner id (WithOwner)
}

func (k *worker) mix() *mix { return &k.w.sc.mix }

// opCtx is a context for one call: the run's, ending within d.
func (k *worker) opCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(k.ctx, d)
}

// detached is a context for a call that must not end with the run
// (releases), still carrying the worker's chooser.
func (k *worker) detached(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(withChooser(context.Background(), k.ch), d)
}

func (k *worker) loop() {
	m := k.mix()
	total := m.acquire + m.try + m.owner + m.force + m.campaign
	for k.ctx.Err() == nil && k.w.closed(k.ci).IsZero() {
		if m.pause[1] > 0 {
			sleep(k.ctx, between(k.ch, m.pause[0], m.pause[1]))
		}
		switch n := k.ch.intn(total); {
		case n < m.acquire:
			k.acquire(false, false)
		case n < m.acquire+m.try:
			k.acquire(true, false)
		case n < m.acquire+m.try+m.owner:
			k.acquire(k.ch.intn(2) == 0, true)
		case n < m.acquire+m.try+m.owner+m.force:
			k.forceRelease()
		default:
			k.campaign()
		}
	}
}

func (k *worker) key() string { return k.w.keys[k.ch.intn(len(k.w.keys))] }

// acquire takes a key (TryAcquire if try, WithOwner if owner), holds it
// and releases it.
func (k *worker) acquire(try, owner bool) {
	m := k.mix()
	key := k.key()
	what := "Acquire"
	if try {
		what = "TryAcquire"
	}
	var opts []turnstile.Option
	if owner {
		opts = append(opts, turnstile.WithOwner(k.owner))
		what += " WithOwner(" + k.owner + ")"
	}
	if chance(k.ch, m.noWatchdog) {
		opts = append(opts, turnstile.WithoutWatchdog())
		what += " WithoutWatchdog"
	}
	ctx, cancel := k.opCtx(between(k.ch, 200*time.Millisecond, 1500*time.Millisecond))
	end := k.w.track(k.ci, what, ctx)
	var l *turnstile.Lease
	var err error
	if try {
		l, err = k.c.TryAcquire(ctx, key, opts...)
	} else {
		l, err = k.c.Acquire(ctx, key, opts...)
	}
	end()
	cancel()
	if err != nil {
		return
	}
	r := k.w.o.hold(k.ci, what, l)
	k.afterClose(what, r)
	k.hold(r, k.holdTime())
	k.release(r)
}

// holdTime is how long a critical section lasts.
func (k *worker) holdTime() time.Duration {
	m := k.mix()
	if chance(k.ch, m.long) {
		return between(k.ch, 300*time.Millisecond, 600*time.Millisecond)
	}
	return between(k.ch, m.hold[0], m.hold[1])
}

// afterClose fails the run if a call on a closed Client returned a lease
// that the store granted after Close returned: the lease is over at
// once, yet its lock stays held for a TTL.
func (k *worker) afterClose(what string, r *rec) {
	at := k.w.closed(k.ci)
	if at.IsZero() {
		return
	}
	if g := k.w.grantedAt(r.key, r.owner); g.After(at) {
		k.w.fail("%s on a closed Client returned %s, granted in the store %v after Close returned (its context: %v): the lock stays held for its TTL",
			what, r, g.Sub(at).Round(time.Millisecond), r.l.Context().Err())
	}
}

// hold runs r's critical section for about d: writes to fenced storage
// with r's token, and now and then an Extend.
func (k *worker) hold(r *rec, d time.Duration) {
	steps := 1 + k.ch.intn(4)
	for i := range steps {
		k.w.o.write(k.ctx, r)
		if i > 0 && chance(k.ch, k.mix().extend) {
			k.extend(r, k.w.sc.ttl)
		}
		if sleep(k.ctx, d/time.Duration(steps)) {
			return
		}
	}
	k.w.o.write(k.ctx, r)
}

func (k *worker) extend(r *rec, ttl time.Duration) error {
	ctx, cancel := k.detached(2 * time.Second)
	defer cancel()
	end := k.w.track(k.ci, fmt.Sprintf("Extend(%v) of %s", ttl, r), ctx)
	defer end()
	return r.l.Extend(ctx, ttl)
}

// release ends r: once, twice at once, with an Extend on its way, or
// again after an error (as Release's doc allows).
func (k *worker) release(r *rec) {
	m := k.mix()
	k.w.o.letGo(r)
	rel := func(what string) error {
		ctx, cancel := k.detached(2 * time.Second)
		defer cancel()
		end := k.w.track(k.ci, what+" of "+r.String(), ctx)
		defer end()
		err := r.l.Release(ctx)
		k.w.stats.released.Add(1)
		if err != nil {
			k.w.stats.failedReleases.Add(1)
		}
		return err
	}
	switch {
	case chance(k.ch, m.double):
		// The second a moment after the first, or at once: the first
		// may be on its way to the store, or handing over.
		var wg sync.WaitGroup
		wg.Go(func() { _ = rel("Release (the first of two)") })
		sleep(k.ctx, between(k.ch, -time.Millisecond, 3*time.Millisecond))
		_ = rel("Release (the second of two)")
		wg.Wait()
	case chance(k.ch, m.extendDuring):
		var wg sync.WaitGroup
		ttl := between(k.ch, turnstile.MinTTL, 300*time.Millisecond)
		wg.Go(func() { _ = k.extend(r, ttl) })
		sleep(k.ctx, between(k.ch, 0, time.Millisecond))
		_ = rel("Release (with an Extend on its way)")
		wg.Wait()
	default:
		err := rel("Release")
		for i := 0; i < 3 && err != nil && !errors.Is(err, turnstile.ErrNotHeld) && !errors.Is(err, turnstile.ErrClosed) && chance(k.ch, m.retry); i++ {
			sleep(k.ctx, between(k.ch, 2*time.Millisecond, 15*time.Millisecond))
			err = rel("Release (again, after an error)")
		}
	}
}

// forceRelease removes a key's lock as an operator does.
func (k *worker) forceRelease() {
	k.forceReleaseOn(k.c, k.key())
	sleep(k.ctx, between(k.ch, 0, k.mix().forcePause))
}

// forcer is an operator who force-releases now and then, through any of
// the run's Clients.
func (k *worker) forcer() {
	for !sleep(k.ctx, between(k.ch, k.w.sc.forcer[0], k.w.sc.forcer[1])) {
		ci := k.ch.intn(len(k.w.clients))
		if k.w.closed(ci).IsZero() {
			k.ci = ci
			k.forceReleaseOn(k.w.clients[ci], k.key())
		}
	}
}

func (k *worker) forceReleaseOn(c *turnstile.Client, key string) {
	rm := &removal{}
	ctx, cancel := k.opCtx(time.Second)
	defer cancel()
	ctx = withRemoval(ctx, rm)
	end := k.w.track(k.ci, "ForceRelease", ctx)
	st, err := c.ForceRelease(ctx, key)
	end()
	if err == nil && st.Held {
		k.w.o.forceReleased(ctx, key, st.Token, rm)
	}
}

// campaign leads the election for a while, now and then long enough to
// check that the observers see it.
func (k *worker) campaign() {
	m := k.mix()
	ctx, cancel := k.ctx, context.CancelFunc(func() {})
	if !chance(k.ch, m.campaignWait) {
		ctx, cancel = k.opCtx(between(k.ch, 300*time.Millisecond, 2*time.Second))
	}
	defer cancel()
	value := fmt.Sprintf("w%d", k.id)
	end := k.w.track(k.ci, "Campaign("+value+")", ctx)
	ld, err := k.w.elections[k.ci].Campaign(ctx, value)
	end()
	if at := k.w.closed(k.ci); !at.IsZero() && err != nil && ctx.Err() == nil && !errors.Is(err, turnstile.ErrClosed) {
		k.w.fail("Campaign(%s) on a Client closed %v ago returned %v, want ErrClosed", value, time.Since(at).Round(time.Millisecond), err)
	}
	if err != nil {
		return
	}
	r := k.w.o.hold(k.ci, "Campaign("+value+")", ld.Lease())
	k.afterClose("Campaign("+value+")", r)
	steady := chance(k.ch, m.steady)
	d := k.holdTime()
	if steady {
		d = between(k.ch, 400*time.Millisecond, 600*time.Millisecond)
	}
	k.hold(r, d)
	if steady {
		k.w.checkObserved(r)
	}
	k.release(r)
}

// observer follows the election with Observe for the whole run.
type observer struct {
	id, client int

	mu    sync.Mutex
	last  turnstile.Leader
	at    time.Time
	ended bool
}

func (ob *observer) report() (turnstile.Leader, time.Time, bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.last, ob.at, ob.ended
}

func (w *world) observe(ob *observer) {
	defer func() {
		ob.mu.Lock()
		ob.ended = true
		ob.mu.Unlock()
	}()
	ctx := withChooser(w.ctx, w.background)
	for ld, err := range w.elections[ob.client].Observe(ctx, 5*time.Millisecond) {
		if err != nil {
			continue // a store error (an injected fault): it goes on
		}
		ob.mu.Lock()
		ob.last, ob.at = ld, time.Now()
		ob.mu.Unlock()
	}
}

// checkObserved fails the run if an observer still does not report r's
// holder as leader after it led steadily, valid throughout.
func (w *world) checkObserved(r *rec) {
	w.mu.Lock()
	obs := append([]*observer(nil), w.obs...)
	w.mu.Unlock()
	for _, ob := range obs {
		seen := false
		for i := 0; i < 50 && !seen && w.ctx.Err() == nil; i++ {
			ld, _, ended := ob.report()
			seen = ended || ld.Owner == r.owner || !w.closed(ob.client).IsZero()
			if !seen {
				sleep(w.ctx, 10*time.Millisecond)
			}
		}
		if seen {
			w.stats.observed.Add(1)
		}
		w.o.mu.Lock()
		valid := w.o.validLocked(r)
		w.o.mu.Unlock()
		if !seen && valid && w.ctx.Err() == nil && time.Since(r.since) > 300*time.Millisecond {
			ld, at, _ := ob.report()
			w.fail("Observe (observer %d on client %d) last reported %v, %v ago, while %s has led for %v, valid throughout",
				ob.id, ob.client, ld, time.Since(at).Round(time.Millisecond), r, time.Since(r.since).Round(time.Millisecond))
			return
		}
	}
}

// evict removes held locks behind their holders' backs, as an operator,
// an eviction policy or a failover would.
func (w *world) evict(ch chooser) {
	fr := w.bases[0].(driver.ForceReleaser)
	keys := append([]string{w.elect}, w.keys...)
	lo, hi := w.sc.evict[0], w.sc.evict[1]
	for !sleep(w.ctx, between(ch, lo, hi)) {
		key := keys[ch.intn(len(keys))]
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if st, err := w.o.remove(key, func() (driver.LockState, error) { return fr.ForceRelease(ctx, key) }, nil); err == nil && st.Held {
			w.stats.removed.Add(1)
		}
		cancel()
	}
}

// closeFirst closes the first Client part way through the run.
func (w *world) closeFirst(ch chooser) {
	if sleep(w.ctx, between(ch, w.sc.closeAt[0], w.sc.closeAt[1])) {
		return
	}
	end := w.track(0, "Close", context.Background())
	_ = w.clients[0].Close()
	end()
	w.closedAt[0].Store(time.Now().UnixNano())
	w.stats.closed.Add(1)
}
