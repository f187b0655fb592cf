package fence

import (
	"fmt"
	"sync"

	"github.com/turnstilelock/turnstile"
)

// Memory is a guard for state held in this process: tests, demos, and
// in-process caches written under a lock. It keeps the last accepted token
// of each resource for as long as it lives.
type Memory struct {
	cfg config
	err error // from the options, returned by every Do

	mu   sync.Mutex
	last map[string]uint64
}

// NewMemory returns an in-memory guard. A bad option makes every Do
// return the option's error (wrapping turnstile.ErrInvalidOption).
func NewMemory(opts ...Option) *Memory {
	m := &Memory{last: make(map[string]uint64)}
	m.cfg, m.err = newConfig(opts)
	if m.err == nil {
		m.err = m.cfg.postgresOnly("in-memory")
	}
	if m.err == nil {
		m.err = m.cfg.redisOnly("in-memory")
	}
	return m
}

// Do runs write only if token is fresh for resource: greater than the last
// token accepted for it (or equal, with AllowSameToken). It records token
// only if write returns nil, and returns write's error as is. A stale token
// gives a *StaleTokenError without running write.
//
// Checking, writing and recording are one atomic step: write runs under
// the guard's mutex, so it must not call the same Memory.
func (m *Memory) Do(resource string, token uint64, write func() error) error {
	if m == nil {
		return fmt.Errorf("%w: nil *fence.Memory", turnstile.ErrInvalidOption)
	}
	if m.err != nil {
		return m.err
	}
	if err := checkResource(resource); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: nil write func", turnstile.ErrInvalidOption)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	last := m.last[resource]
	if token < last || token == last && !m.cfg.allowSame {
		return &StaleTokenError{Resource: resource, Token: token, Last: last}
	}
	if err := write(); err != nil {
		return err
	}
	m.last[resource] = token
	return nil
}

// Last returns the last token accepted for resource, 0 if none.
func (m *Memory) Last(resource string) uint64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[resource]
}
