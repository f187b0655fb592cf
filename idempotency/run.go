package idempotency

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Store runs a request once per request key. Memory, Redis and Postgres
// implement it.
type Store interface {
	// Do runs fn once per key: the first call runs fn and stores its result; a concurrent duplicate gets ErrInProgress
	// (or waits, WithWait); a later duplicate gets the stored result without running fn (replayed=true);
	// an fn error is returned and leaves the key retryable (nothing stored).
	Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) (result []byte, replayed bool, err error)
}

// state is what a claim attempt found.
type state int

const (
	claimed state = iota // the key is ours: run fn
	running              // another call holds the claim
	done                 // a stored result, not expired
)

// outcome is the answer of one claim attempt.
type outcome struct {
	state  state
	result []byte // with done
	// changed, if not nil, is closed when the claim found (running) ends,
	// so that a waiting duplicate need not poll.
	changed <-chan struct{}
}

// backend is one store's side of Do. Every method is a single atomic step
// on the store; renew, complete and release act only while owner holds the
// claim, and report false when it does not.
type backend interface {
	// claim takes key for owner if it is free, or its claim or result has
	// expired; otherwise it reports the running claim or the result.
	claim(ctx context.Context, key, owner string) (outcome, error)
	renew(ctx context.Context, key, owner string) (bool, error)
	// complete replaces owner's claim by result, kept for the retention.
	complete(ctx context.Context, key, owner string, result []byte) (bool, error)
	// release drops owner's claim, so the key can run again at once.
	release(ctx context.Context, key, owner string) (bool, error)
	name() string
}

// storeTimeout bounds storing a result or releasing a claim once fn has
// returned: these run even when the caller's context is already done,
// because the work fn did must be recorded (or its claim freed) anyway.
const storeTimeout = 10 * time.Second

// Waiting duplicates poll with exponential backoff and jitter between
// these bounds (unless the store tells them when the claim ends).
const (
	pollBase = 2 * time.Millisecond
	pollCap  = 100 * time.Millisecond
)

// runner is the store-independent part of Do.
type runner struct {
	cfg config
	b   backend
}

// Do implements Store.
func (r *runner) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	if fn == nil {
		return nil, false, fmt.Errorf("%w (key %q)", ErrNilFunc, key)
	}
	if ctx.Err() != nil {
		return nil, false, r.errorf(key, "do", ctxErr(ctx))
	}
	owner := newOwner()
	var deadline time.Time
	if r.cfg.wait > 0 {
		deadline = time.Now().Add(r.cfg.wait)
	}
	poll := pollBase
	for {
		o, err := r.b.claim(ctx, key, owner)
		if err != nil {
			if ctx.Err() != nil {
				err = ctxErr(ctx)
			}
			return nil, false, r.errorf(key, "claim", err)
		}
		switch o.state {
		case claimed:
			return r.run(ctx, key, owner, fn)
		case done:
			return o.result, true, nil
		}
		left := time.Until(deadline)
		if r.cfg.wait == 0 || left <= 0 {
			return nil, false, r.errorf(key, "do", ErrInProgress)
		}
		// Equal jitter: never less than half the step, so duplicates do
		// not spin, and spread so that they do not poll in step.
		d := poll/2 + rand.N(poll/2+1)
		poll = min(2*poll, pollCap)
		t := time.NewTimer(min(d, left))
		select {
		case <-t.C:
		case <-o.changed:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, false, r.errorf(key, "wait", ctxErr(ctx))
		}
	}
}

// run runs fn under owner's claim and stores its result.
func (r *runner) run(ctx context.Context, key, owner string, fn func(context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := r.renewWhileRunning(fctx, cancel, key, owner)
	finished := false
	defer func() {
		if !finished {
			// fn panicked: stop renewing and free the key before the
			// panic goes on.
			stop()
			r.release(ctx, key, owner)
		}
	}()
	result, err = fn(fctx)
	finished = true
	stop()
	if err != nil {
		if rerr := r.release(ctx, key, owner); rerr != nil {
			return nil, false, errors.Join(err, rerr)
		}
		return nil, false, err
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer scancel()
	ok, serr := r.b.complete(sctx, key, owner, result)
	if serr != nil {
		return result, false, r.errorf(key, "store result", serr)
	}
	if !ok {
		return result, false, r.errorf(key, "store result", ErrClaimLost)
	}
	return result, false, nil
}

// release frees owner's claim after fn failed. A claim already lost is no
// error: the key is free or someone else's.
func (r *runner) release(ctx context.Context, key, owner string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := r.b.release(rctx, key, owner); err != nil {
		return r.errorf(key, "release claim", fmt.Errorf("%w (the key stays claimed until its claim ttl ends)", err))
	}
	return nil
}

func (r *runner) errorf(key, op string, err error) error {
	return &RequestError{Op: op, Key: key, Store: r.b.name(), Err: err}
}

// ctxErr is why ctx is done: its error (context.Canceled or
// DeadlineExceeded), and its cause too where the caller gave one.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("turnstile/idempotency: %w: empty key", turnstile.ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("turnstile/idempotency: %w: key is %d bytes, longer than %d", turnstile.ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// newOwner names one call of Do: 128 random bits, so that no two calls,
// in any process, ever share a claim.
func newOwner() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand.Read panics instead)
	return hex.EncodeToString(b[:])
}
