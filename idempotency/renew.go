package idempotency

import (
	"context"
	"fmt"
	"time"
)

// renewWhileRunning renews owner's claim on key every third of the claim
// TTL, from one goroutine, until the returned stop is called; stop waits
// for the goroutine to end. When the store refuses a renewal, or none is
// confirmed for a whole claim TTL (the claim may have expired and been
// taken over), it cancels fctx with cause ErrClaimLost and stops renewing.
func (r *runner) renewWhileRunning(fctx context.Context, cancel context.CancelCauseFunc, key, owner string) (stop func()) {
	ttl := r.cfg.claimTTL
	interval := ttl / 3
	// The claim was taken just before fn started: it is certainly ours
	// until a TTL after now at the latest.
	until := time.Now().Add(ttl)
	quit := make(chan struct{})
	ended := make(chan struct{})
	// Renewals go on after the caller's context is done: fn may still be
	// finishing work whose result must be stored.
	bg := context.WithoutCancel(fctx)
	go func() {
		defer close(ended)
		t := time.NewTimer(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			sent := time.Now()
			// A renewal that lands before the claim would expire is in
			// time, however slow.
			rctx, rcancel := context.WithDeadline(bg, until)
			ok, err := r.b.renew(rctx, key, owner)
			rcancel()
			switch {
			case err == nil && ok:
				until = sent.Add(ttl)
			case err == nil:
				cancel(fmt.Errorf("%w: the store refused to renew the claim on %q", ErrClaimLost, key))
				return
			case !time.Now().Before(until):
				cancel(fmt.Errorf("%w: no renewal of the claim on %q confirmed for %v (last error: %v)", ErrClaimLost, key, ttl, err))
				return
			}
			t.Reset(max(0, min(interval, time.Until(until))))
		}
	}()
	return func() {
		select {
		case <-quit:
		default:
			close(quit)
		}
		<-ended
	}
}
