package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Extend implements driver.Backend. It goes to every node and succeeds
// when a quorum extended the lock and the lease still has validity left
// after the round trip: TTL − elapsed − drift > 0. It returns false (with
// a nil error) only when more than N − quorum nodes said they no longer
// hold the lock, so that no quorum can, and a quorum of nodes answered;
// it returns a *QuorumError when the outcome is unknown because failed
// nodes keep the quorum out of reach (the watchdog then retries until the
// lease's deadline). It decides as early as Acquire does, by the same
// rule.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := b.check(ctx, ttl); err != nil {
		return false, err
	}
	start := b.now()
	timeout := b.cfg.timeout(ttl)
	r := b.start(ctx, "extend", timeout, b.all, func(ctx context.Context, n *node) answer {
		ok, err := n.b.Extend(ctx, key, owner, ttl)
		return answer{yes: ok && err == nil, err: err}
	})
	r.wait(b, b.quorum, time.Now().Add(timeout))
	return b.extended(ctx, r, ttl, b.now().Sub(start))
}

// extended is the result of an extension round that took elapsed.
func (b *Backend) extended(ctx context.Context, r *round, ttl, elapsed time.Duration) (bool, error) {
	ok, err := r.verdict(b)
	b.observe(ctx, "extend", err == nil)
	if ok && validity(ttl, elapsed) <= 0 {
		e := r.quorumError(b)
		e.Elapsed = elapsed
		return false, e
	}
	return ok, err
}

// ExtendMany implements driver.BatchExtender: each node gets the whole
// batch in one call (one pipelined round trip on Redis), all nodes at
// once, and each request succeeds as Extend would.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	if len(reqs) == 0 {
		return res
	}
	minTTL, maxTTL := reqs[0].TTL, reqs[0].TTL
	for _, r := range reqs[1:] {
		minTTL, maxTTL = min(minTTL, r.TTL), max(maxTTL, r.TTL)
	}
	if err := b.check(ctx, maxTTL); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	start := b.now()
	timeout := b.cfg.timeout(minTTL)
	type batch struct {
		node int
		res  []driver.ExtendResult
	}
	answers := make(chan batch, len(b.nodes))
	rounds := make([]*round, len(reqs))
	for j := range rounds {
		rounds[j] = &round{op: "extend", timeout: timeout, state: make([]uint8, len(b.nodes)), tokens: make([]uint64, len(b.nodes)), pending: len(b.nodes), refusable: true}
	}
	nctx, stop := nodeContext(ctx, timeout)
	var running sync.WaitGroup
	for i := range b.nodes {
		for _, r := range rounds {
			r.state[i] = statePending
		}
		n := &b.nodes[i]
		running.Add(1)
		ok := b.spawn(func() {
			defer running.Done()
			res := n.extendMany(nctx, reqs)
			for j := range res {
				res[j].Err = nodeError(ctx, nctx, res[j].Err)
			}
			answers <- batch{i, res}
		})
		if !ok {
			running.Done()
			failed := make([]driver.ExtendResult, len(reqs))
			for j := range failed {
				failed[j].Err = errClosed
			}
			answers <- batch{i, failed}
		}
	}

	if !b.spawn(func() { running.Wait(); stop() }) {
		running.Wait() // closed: every call above failed at once
		stop()
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
collect:
	for range b.nodes {
		if !b.cfg.waitAll && allDecided(rounds, b.quorum) {
			break
		}
		select {
		case a := <-answers:
			for j, r := range rounds {
				x := a.res[j]
				r.take(b, answer{node: a.node, yes: x.OK && x.Err == nil, err: x.Err})
			}
		case <-timer.C:
			for _, r := range rounds {
				r.expire(b)
			}
			break collect
		}
	}
	elapsed := b.now().Sub(start)
	for j, r := range rounds {
		res[j].OK, res[j].Err = b.extended(ctx, r, reqs[j].TTL, elapsed)
	}
	return res
}

func allDecided(rounds []*round, need int) bool {
	for _, r := range rounds {
		if !r.decided(need) {
			return false
		}
	}
	return true
}

// extendMany renews every request on one node: in one call if the node
// batches, else with one concurrent Extend per request. It always returns
// one result per request.
func (n *node) extendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	if n.batch != nil {
		res := n.batch.ExtendMany(ctx, reqs)
		if len(res) == len(reqs) {
			return res
		}
		err := fmt.Errorf("ExtendMany returned %d results for %d requests", len(res), len(reqs))
		res = make([]driver.ExtendResult, len(reqs))
		for j := range res {
			res[j].Err = err
		}
		return res
	}
	res := make([]driver.ExtendResult, len(reqs))
	var wg sync.WaitGroup
	for j, r := range reqs {
		wg.Go(func() { res[j].OK, res[j].Err = n.b.Extend(ctx, r.Key, r.Owner, r.TTL) })
	}
	wg.Wait()
	return res
}
