package turnstile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// roomStore is a memory backend whose tokens leave room between grants
// (driver.TokenRoom), as Redis's do, in every answer: grants, Inspect and
// ForceRelease. Its tokens are the memory store's times twice the room,
// so that the next grant after a forced release is above the floor that
// ForceRelease reports, the next multiple of the room above the removed
// holder's token, as Redis's script does. Tests steer it
// through its hooks to stand for a store that acts but loses its reply,
// or a request that reaches the store late.
type roomStore struct {
	mem  *memory.Backend
	room uint64

	// loseRelease: the next Release frees the lock in the store and then
	// fails, as when the reply is lost.
	loseRelease atomic.Bool
	// releaseGate, extendGate: when set, Release and Extend wait on them
	// before they reach the store (a request on its way).
	releaseGate, extendGate chan struct{}
	// releasing, extending receive a value as a Release or Extend waits
	// at its gate.
	releasing, extending chan struct{}

	mu       sync.Mutex
	failed   map[string]int // owner → Acquire attempts that found the key held
	inspects int
	// inspect, if set, may change what Inspect answers; n counts the
	// Inspect calls from 1.
	inspect func(n int, st driver.LockState) driver.LockState
}

const storeRoom = 16

func newRoomStore() *roomStore {
	return &roomStore{mem: memory.New(), room: storeRoom, failed: make(map[string]int)}
}

var (
	_ driver.TokenRoom     = (*roomStore)(nil)
	_ driver.Inspector     = (*roomStore)(nil)
	_ driver.ForceReleaser = (*roomStore)(nil)
)

func (s *roomStore) Name() string      { return "room memory" }
func (s *roomStore) TokenRoom() uint64 { return s.room }

func (s *roomStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	tok, ok, err := s.mem.Acquire(ctx, key, owner, ttl)
	if err == nil && !ok {
		s.mu.Lock()
		s.failed[owner]++
		s.mu.Unlock()
	}
	return tok * 2 * s.room, ok, err
}

// failedAny is how many attempts of any owner found the key held.
func (s *roomStore) failedAny() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.failed {
		n += c
	}
	return n
}

func (s *roomStore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if s.extendGate != nil {
		s.extending <- struct{}{}
		<-s.extendGate
	}
	return s.mem.Extend(ctx, key, owner, ttl)
}

func (s *roomStore) Release(ctx context.Context, key, owner string) (bool, error) {
	if s.releaseGate != nil {
		s.releasing <- struct{}{}
		<-s.releaseGate
	}
	ok, err := s.mem.Release(ctx, key, owner)
	if err == nil && s.loseRelease.CompareAndSwap(true, false) {
		return false, errLostReply
	}
	return ok, err
}

const errLostReply = errString("room memory: connection reset before the reply")

func (s *roomStore) scale(st driver.LockState) driver.LockState {
	st.Token *= 2 * s.room
	hs := make([]driver.Holder, len(st.Holders))
	for i, h := range st.Holders {
		h.Token *= 2 * s.room
		hs[i] = h
	}
	st.Holders = hs
	return st
}

func (s *roomStore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	st, err := s.mem.Inspect(ctx, key)
	if err != nil {
		return st, err
	}
	st = s.scale(st)
	s.mu.Lock()
	s.inspects++
	n, f := s.inspects, s.inspect
	s.mu.Unlock()
	if f != nil {
		st = f(n, st)
	}
	return st, nil
}

func (s *roomStore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	states, more, err := s.mem.List(ctx, prefix, limit)
	for i := range states {
		states[i] = s.scale(states[i])
	}
	return states, more, err
}

// ForceRelease removes the lock and reports the fence floor as Redis
// does: the next multiple of the room above the removed holder's token.
func (s *roomStore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	st, err := s.mem.ForceRelease(ctx, key)
	if err != nil {
		return st, err
	}
	st = s.scale(st)
	if st.Held && len(st.Holders) > 0 {
		t := st.Holders[0].Token
		st.Token = t - t%s.room + s.room
	}
	return st, nil
}
