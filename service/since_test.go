package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// timedStore's grants say the store has held them since age before the
// call (as an etcd lease renewed earlier does); it counts the plain
// Acquires that reach it.
type timedStore struct {
	*memory.Backend
	age   atomic.Int64 // a time.Duration
	plain atomic.Int64
}

func (s *timedStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	s.plain.Add(1)
	return s.Backend.Acquire(ctx, key, owner, ttl)
}

func (s *timedStore) AcquireSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, time.Time, error) {
	since := time.Now().Add(-time.Duration(s.age.Load()))
	tok, ok, err := s.Backend.Acquire(ctx, key, owner, ttl)
	return tok, ok, since, err
}

// TestTryAcquireCountsFromTheStoresGrant: a TryAcquire on a store whose
// grants say since when it holds them takes the grant that way — no
// plain Acquire, which would renew what holds it — and the validity it
// answers counts from that time; a grant older than the TTL is given
// back and not acquired.
func TestTryAcquireCountsFromTheStoresGrant(t *testing.T) {
	store := &timedStore{Backend: memory.New()}
	in := startInstance(t, service.Config{Backend: store})
	c := clientsOf(t, in.addr)
	ctx := ctxFor(t, time.Minute)
	const ttl = 10 * time.Second
	store.age.Store(int64(ttl / 2))
	r, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "k", Ttl: durationpb.New(ttl)}))
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Msg.Validity.AsDuration(); v <= 0 || v > ttl/2 {
		t.Fatalf("validity %v of a grant held since %v ago, want at most %v", v, ttl/2, ttl/2)
	}
	if n := store.plain.Load(); n != 0 {
		t.Fatalf("%d plain Acquires reached the store", n)
	}
	if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: r.Msg.Lease})); err != nil {
		t.Fatal(err)
	}

	store.age.Store(int64(ttl + time.Second))
	_, err = c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "k", Ttl: durationpb.New(ttl)}))
	if ce := new(connect.Error); !errors.As(err, &ce) || ce.Code() != connect.CodeAborted {
		t.Fatalf("a grant older than the TTL: %v, want not acquired", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok, err := store.Backend.Acquire(ctx, "k", "other", ttl); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the too-old grant was not given back")
		}
	}
}
