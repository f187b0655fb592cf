//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
)

// warmUp takes and releases the keys on every instance's Redlock,
// outside the breakers, until they are granted: fresh nodes load the
// scripts on their first calls, and refuse locks during their restart
// quarantine (which a Redis node counts per key's hash slot, from the
// first acquisition when its process has just started); a breaker would
// count either as failures.
func (o *outage) warmUp(ctx context.Context) error {
	if o.quar > 0 {
		o.env.progress("redlock-outage: waiting out the fresh nodes' %v restart quarantine...", o.quar)
	}
	wctx, cancel := context.WithTimeout(ctx, o.quar+outageWait)
	defer cancel()
	for _, inst := range o.inst {
		owner := "warm-up/" + inst.name
		for _, key := range o.keys {
			for {
				_, ok, err := inst.rl.Acquire(wctx, key.name, owner, o.cfg.ttl)
				if err == nil && ok {
					_, _ = inst.rl.Release(wctx, key.name, owner)
					break
				}
				if wctx.Err() != nil {
					if err := ctx.Err(); err != nil {
						return err
					}
					return fmt.Errorf("the Redlock granted no lock within %v of starting (last: %v)", o.quar+outageWait, err)
				}
				_ = sleepCtx(wctx, 20*time.Millisecond)
			}
		}
	}
	return nil
}

// work is one instance's loop: take a key, hold it, write its token to
// the fenced register, release it; until the run stops.
func (o *outage) work(ctx context.Context, inst *outageInstance) {
	for n := inst.index; !o.stopping.Load() && ctx.Err() == nil; n++ {
		ki := n % len(o.keys)
		key := o.keys[ki]
		ph := int(o.phase.Load())
		t0 := time.Now()
		l, err := inst.client.TryAcquire(ctx, key.name)
		lat := time.Since(t0)
		switch {
		case err == nil:
			label, _ := inst.grants.LoadAndDelete(l.Owner())
			store, _ := label.(string)
			o.mu.Lock()
			st := &o.stats[ph]
			st.granted[store]++
			st.keys[store] |= 1 << ki
			st.grantLat = append(st.grantLat, lat)
			o.mu.Unlock()
			o.critical(ctx, key, l, store, ph)
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, turnstile.ErrNotAcquired):
			o.mu.Lock()
			o.stats[ph].busy++
			o.mu.Unlock()
		default:
			// A failure belongs to the phase it ended in: an attempt in
			// flight when the nodes were killed failed because of it.
			o.mu.Lock()
			st := &o.stats[o.phase.Load()]
			if st.failed == 0 {
				st.firstFail, st.firstErr = o.since(), err.Error()
			}
			st.failed++
			st.failLat = append(st.failLat, lat)
			o.mu.Unlock()
		}
		_ = sleepCtx(ctx, o.cfg.pause())
	}
}

// critical is one critical section: it checks that the lease's token is
// above the last one of a critical section of the key, holds the lock,
// writes the token through the fenced register, and releases.
func (o *outage) critical(ctx context.Context, key *outageKey, l *turnstile.Lease, store string, ph int) {
	token := l.Token()
	key.mu.Lock()
	// A lease that ended before its critical section began is no holder;
	// a later one may already have begun.
	if l.Validity() == 0 {
		key.mu.Unlock()
		o.mu.Lock()
		o.checks.lateStarts++
		o.mu.Unlock()
	} else {
		o.mu.Lock()
		o.checks.began(key, token, store, ph)
		o.mu.Unlock()
		key.last, key.lastStore, key.lastPhase = token, store, ph
		key.mu.Unlock()
	}

	_ = sleepCtx(ctx, o.cfg.hold())
	err := o.register.Set(ctx, key.name, token, fence.DataKey(key.name, "register"), strconv.FormatUint(token, 10))
	current := l.Validity() > 0 // after the write: a holder that was still current when refused
	o.mu.Lock()
	o.checks.wrote(err, current, ctx.Err() != nil, func() string {
		return fmt.Sprintf("token %d from %s (%s), %v of its lease left: %v", token, store, outagePhaseNames[ph], l.Validity().Round(time.Millisecond), err)
	})
	o.mu.Unlock()
	if err := l.Release(ctx); err != nil && ctx.Err() == nil {
		o.mu.Lock()
		o.stats[ph].releaseFailed++
		o.mu.Unlock()
	}
}
