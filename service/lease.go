package service

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/turnstilelock/turnstile"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// What every call on a lock shares: checking its key, kind, owner and
// TTL, and telling the instance's watchers what it did.

// releaseTimeout bounds a release the instance makes on its own: of a
// lock taken for a caller that went away, or of a Hold stream's lease.
const releaseTimeout = 5 * time.Second

// maxOwnerLen is the longest owner id a request may name (as
// turnstile.WithOwner).
const maxOwnerLen = 256

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", turnstile.ErrInvalidKey)
	}
	if len(key) > turnstile.MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", turnstile.ErrInvalidKey, len(key), turnstile.MaxKeyLen)
	}
	return nil
}

func checkOwner(owner string) error {
	if owner == "" || len(owner) > maxOwnerLen {
		return fmt.Errorf("%w: owner id must be 1 to %d bytes, got %d", turnstile.ErrInvalidOption, maxOwnerLen, len(owner))
	}
	for i := 0; i < len(owner); i++ {
		if owner[i] < 0x20 || owner[i] == 0x7f {
			return fmt.Errorf("%w: owner id contains a control character", turnstile.ErrInvalidOption)
		}
	}
	return nil
}

// lockOf checks a call on key's lock of kind (with permits), that the
// caller may make it with role, and returns the kind's view.
func (s *Server) lockOf(ctx context.Context, r role, key string, kind v1.Kind, permits uint32) (*lockView, error) {
	if !admitted(ctx) {
		if err := s.check(); err != nil {
			return nil, err
		}
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := allow(ctx, r, key); err != nil {
		return nil, err
	}
	k, err := kindOf(kind, permits)
	if err != nil {
		return nil, err
	}
	return s.views.get(k)
}

// handleOf checks a call on a lease by its handle and returns its view.
func (s *Server) handleOf(ctx context.Context, l *v1.Lease) (*lockView, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: no lease: give the lease an acquisition returned", turnstile.ErrInvalidOption)
	}
	v, err := s.lockOf(ctx, roleLock, l.Key, l.Kind, l.Permits)
	if err != nil {
		return nil, err
	}
	if err := checkOwner(l.Owner); err != nil {
		return nil, err
	}
	return v, nil
}

// newOwner is an owner id of this instance: its id and 128 random bits,
// as a Client makes them.
func (s *Server) newOwner() string { return s.cfg.Instance + "/" + rand.Text() }

// drift is the part of ttl not trusted, as the Client reckons it.
func drift(ttl time.Duration) time.Duration {
	return ttl/100 + min(turnstile.DefaultDriftMinimum, ttl/4)
}

// validity is how long a lease granted or renewed for ttl by a request
// sent at sent is certainly still held.
func validity(ttl time.Duration, sent time.Time) time.Duration {
	return max(0, ttl-drift(ttl)-time.Since(sent))
}

func leaseOf(v *lockView, key, owner string, token uint64) *v1.Lease {
	return &v1.Lease{Key: key, Owner: owner, Token: token, Kind: v.key.kind, Permits: uint32(v.key.permits)}
}

func grant(v *lockView, key, owner string, token uint64, ttl, valid time.Duration) *v1.AcquireResponse {
	return &v1.AcquireResponse{Lease: leaseOf(v, key, owner, token), Ttl: durationpb.New(ttl), Validity: durationpb.New(valid)}
}

// event tells this instance's watchers what it did to a lock.
func (s *Server) event(t v1.EventType, v *lockView, key, owner string, token uint64) {
	if !s.hub.watched() {
		return
	}
	s.hub.publish(&v1.Event{Type: t, Key: key, Owner: owner, Token: token, Time: timestamppb.Now(),
		Source: v1.EventSource_EVENT_SOURCE_INSTANCE, Kind: v.key.kind})
}

// giveBack releases, in the background, a lock the instance may have
// taken under an owner id nobody else knows: an acquisition whose
// outcome is unknown, or whose caller went away.
func (s *Server) giveBack(v *lockView, key, owner string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if _, err := v.store.Release(ctx, key, owner); err != nil {
			s.cfg.Logger.Warn("turnstile serve: could not give back a lock nobody will use; it expires after its TTL", "key", key, "err", err)
		}
	}()
}

// detach lets the instance's Client forget l without touching the store
// (detach.go): the caller holds the lock now, by its handle.
func detach(l *turnstile.Lease) {
	ctx, cancel := context.WithTimeout(detached(context.Background()), releaseTimeout)
	defer cancel()
	_ = l.Release(ctx)
}

// waitOptions are the per-call options of a wait for a lock on behalf of
// a caller: its TTL, no limit on retries (the wait's context bounds it),
// and its owner id if it named one.
func waitOptions(ttl time.Duration, owner string, watchdog bool) []turnstile.Option {
	opts := []turnstile.Option{
		turnstile.WithTTL(ttl),
		turnstile.WithBackoff(turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1}),
	}
	if !watchdog {
		opts = append(opts, turnstile.WithoutWatchdog())
	}
	if owner != "" {
		opts = append(opts, turnstile.WithOwner(owner))
	}
	return opts
}
