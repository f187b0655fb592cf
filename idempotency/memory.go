package idempotency

import (
	"context"
	"sync"
	"time"
)

// Memory is a Store inside one process: for tests, demos and programs
// that run as a single instance. It forgets everything when the process
// ends, and duplicates arriving at other processes are not seen; use Redis
// or Postgres for a service with several instances.
//
// A duplicate waiting WithWait is woken the moment the first call ends.
type Memory struct {
	r    runner
	err  error // from the options, returned by every Do
	opts []Option
	data *memData
}

// memData is the entries of a Memory and of the Memories made from it
// by With.
type memData struct {
	mu      sync.Mutex
	entries map[string]*memEntry
	swept   int // len(entries) after the last sweep
}

var _ Store = (*Memory)(nil)

// memEntry is a running claim (owner set) or a stored result.
type memEntry struct {
	owner   string
	result  []byte
	expires time.Time
	changed chan struct{} // closed when the claim ends; nil for a result
}

// NewMemory returns an empty in-process store. If an option is invalid,
// every Do returns its error (errors.Is turnstile.ErrInvalidOption).
func NewMemory(opts ...Option) *Memory {
	return newMemory(&memData{entries: make(map[string]*memEntry)}, opts)
}

func newMemory(d *memData, opts []Option) *Memory {
	m := &Memory{opts: append([]Option(nil), opts...), data: d}
	cfg, err := newConfig(opts)
	if err != nil {
		m.err = err
	}
	m.r = runner{cfg: cfg, b: &memBackend{memData: d, cfg: cfg}}
	return m
}

// With returns a Memory that shares m's requests — a key claimed or
// stored through one is claimed or stored for the other — with opts
// applied after m's own options: as two processes on one Redis server may
// wait differently, or keep results for different times.
func (m *Memory) With(opts ...Option) *Memory {
	return newMemory(m.data, append(append([]Option(nil), m.opts...), opts...))
}

// Do implements Store.
func (m *Memory) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, bool, error) {
	if m.err != nil {
		return nil, false, m.r.errorf(key, "do", m.err)
	}
	return m.r.Do(ctx, key, fn)
}

func (m *Memory) runner() *runner { return &m.r }

// memBackend is Memory's backend; its methods hold the data's mutex.
type memBackend struct {
	*memData
	cfg config
}

func (b *memBackend) name() string { return "memory" }

func (b *memBackend) claim(_ context.Context, key, owner string) (outcome, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if e := b.entries[key]; e != nil && now.Before(e.expires) {
		if e.owner == "" {
			return outcome{state: done, result: append([]byte(nil), e.result...)}, nil
		}
		return outcome{state: running, changed: e.changed}, nil
	} else if e != nil {
		b.end(e)
	}
	b.sweep(now)
	b.entries[key] = &memEntry{owner: owner, expires: now.Add(b.cfg.claimTTL), changed: make(chan struct{})}
	return outcome{state: claimed}, nil
}

// held returns owner's live claim on key, or nil. The claim need not be
// unexpired: until someone else claims the key, it is still owner's.
func (b *memBackend) held(key, owner string) *memEntry {
	if e := b.entries[key]; e != nil && e.owner == owner {
		return e
	}
	return nil
}

// withHeld runs change on owner's claim on key, with b locked, and
// reports whether there was one.
func (b *memBackend) withHeld(key, owner string, change func(e *memEntry)) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.held(key, owner)
	if e == nil {
		return false, nil
	}
	change(e)
	return true, nil
}

func (b *memBackend) renew(_ context.Context, key, owner string) (bool, error) {
	return b.withHeld(key, owner, func(e *memEntry) { e.expires = time.Now().Add(b.cfg.claimTTL) })
}

func (b *memBackend) complete(_ context.Context, key, owner string, result []byte) (bool, error) {
	return b.withHeld(key, owner, func(e *memEntry) {
		b.end(e)
		// A copy: the caller keeps its slice, and replays must not see
		// later changes to it.
		b.entries[key] = &memEntry{result: append([]byte{}, result...), expires: time.Now().Add(b.cfg.retention)}
	})
}

func (b *memBackend) release(_ context.Context, key, owner string) (bool, error) {
	return b.withHeld(key, owner, func(e *memEntry) {
		b.end(e)
		delete(b.entries, key)
	})
}

// end wakes the duplicates waiting for e's claim to end.
func (b *memBackend) end(e *memEntry) {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// sweep drops expired entries once the map has doubled since the last
// sweep, so memory stays proportional to the live entries at an amortised
// constant cost per claim.
func (b *memBackend) sweep(now time.Time) {
	if len(b.entries) < 2*b.swept+64 {
		return
	}
	for k, e := range b.entries {
		if !now.Before(e.expires) {
			b.end(e)
			delete(b.entries, k)
		}
	}
	b.swept = len(b.entries)
}
