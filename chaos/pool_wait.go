package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// await waits until cond, called with p.mu held, is true, and reports
// whether it was within timeout; an ended ctx is its error.
func (p *workers) await(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ok, ch := cond(), p.changed
		p.mu.Unlock()
		if ok {
			return true, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// waitGrants waits until n grants have been recorded.
func (p *workers) waitGrants(ctx context.Context, n int, timeout time.Duration) error {
	var got int
	ok, err := p.await(ctx, timeout, func() bool { got = p.grants; return got >= n })
	if err == nil && !ok {
		err = fmt.Errorf("no lock granted to the workers within %v (%d of %d grants): %s", timeout, got, n, p.lastError())
	}
	return err
}

// waitGrantAfter waits, at most bound, until every key has a grant that
// returned after at (Unix ns).
func (p *workers) waitGrantAfter(ctx context.Context, at int64, bound time.Duration) {
	keys := max(p.s.Keys, 1)
	_, _ = p.await(ctx, bound, func() bool {
		granted := map[int]bool{}
		for i := len(p.events) - 1; i >= 0 && len(granted) < keys; i-- {
			if e := p.events[i]; e.Ev == evAcquired && e.End >= at {
				granted[e.K] = true
			}
		}
		return len(granted) >= keys
	})
}

func (p *workers) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.events) - 1; i >= 0; i-- {
		if p.events[i].Err != "" {
			return p.events[i].Err
		}
	}
	return "no worker reported an error"
}

// inSection returns a worker that holds the lock and is between reading
// the registers and writing them (want "short" or "long"; "" for either),
// waiting up to timeout for one.
func (p *workers) inSection(ctx context.Context, want string, timeout time.Duration) (*worker, error) {
	var found *worker
	ok, err := p.await(ctx, timeout, func() bool {
		for id, h := range p.inHold {
			if w := p.procs[id]; w != nil && !w.paused && (want == "" || h == want) {
				found = w
				return true
			}
		}
		return false
	})
	if err == nil && !ok {
		err = errors.New("no worker was in a critical section within " + timeout.String())
	}
	if err != nil {
		return nil, err
	}
	return found, nil
}

// longHolder asks the workers for a long hold and waits until one is in
// it: a fault injected then finds a holder between its reads and its
// writes, and keeps it there until after the fault.
func (p *workers) longHolder(ctx context.Context, timeout time.Duration) (*worker, error) {
	// A long hold from the fault before may still run (it outlasts its
	// fault): the new one must begin afresh, and not follow it at once
	// after this fault healed.
	if err := p.noLongHold(ctx, timeout); err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, w := range p.procs {
		_, _ = io.WriteString(w.stdin, "long\n")
	}
	p.mu.Unlock()
	w, err := p.inSection(ctx, "long", timeout)
	// One long hold is enough: the others go back to short ones.
	p.mu.Lock()
	for _, o := range p.procs {
		if o != w {
			_, _ = io.WriteString(o.stdin, "short\n")
		}
	}
	p.mu.Unlock()
	return w, err
}

// noLongHold waits until no worker is in a long hold, up to timeout.
func (p *workers) noLongHold(ctx context.Context, timeout time.Duration) error {
	ok, err := p.await(ctx, timeout, func() bool {
		for id, h := range p.inHold {
			if h == "long" && p.procs[id] != nil {
				return false
			}
		}
		return true
	})
	if err == nil && !ok {
		err = errors.New("a long hold did not end within " + timeout.String())
	}
	return err
}
