package service

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// maxSemaphores bounds how many numbers of permits the service keeps a
// semaphore view and Client for: each Client has its own watchdog, and a
// Client with leases cannot be closed.
const maxSemaphores = 256

// kindKey names one lock kind of the store: a kind and, for a semaphore,
// its number of permits.
type kindKey struct {
	kind    v1.Kind
	permits int
}

// lockView is one lock kind of the store: the store's view for it, which
// the service calls for what a handle does, and a Client over it that
// waits for its locks and renews the leases of Hold streams.
type lockView struct {
	key    kindKey
	store  driver.Backend
	client *turnstile.Client
}

// views makes each kind's view and Client once, on first use.
type views struct {
	root driver.Backend
	opts []turnstile.Option // every Client's

	// made is a copy of m that every op reads without the lock: m only
	// grows, and each change replaces the copy.
	made atomic.Pointer[map[kindKey]*lockView]

	mu      sync.Mutex
	m       map[kindKey]*lockView
	refused map[kindKey]error // kinds the store does not have
	sems    int
	closed  bool
}

func newViews(root driver.Backend, opts []turnstile.Option) *views {
	return &views{root: root, opts: opts, m: map[kindKey]*lockView{}, refused: map[kindKey]error{}}
}

// errClosing: the service is shutting down.
var errClosing = errors.New("turnstile serve: shutting down")

// kindOf checks a request's kind and permits and names the view.
func kindOf(kind v1.Kind, permits uint32) (kindKey, error) {
	if kind == v1.Kind_KIND_UNSPECIFIED {
		kind = v1.Kind_KIND_LOCK
	}
	switch kind {
	case v1.Kind_KIND_SEMAPHORE:
		if err := driver.CheckPermits(int(permits)); err != nil {
			return kindKey{}, err
		}
		return kindKey{kind, int(permits)}, nil
	case v1.Kind_KIND_LOCK, v1.Kind_KIND_SHARED, v1.Kind_KIND_EXCLUSIVE, v1.Kind_KIND_FAIR, v1.Kind_KIND_REENTRANT:
		if permits != 0 {
			return kindKey{}, fmt.Errorf("%w: permits %d given for %s: only a semaphore has permits", turnstile.ErrInvalidOption, permits, kind)
		}
		return kindKey{kind: kind}, nil
	}
	return kindKey{}, fmt.Errorf("%w: unknown lock kind %d", turnstile.ErrInvalidOption, kind)
}

// get returns the view of k, making it on first use.
func (vs *views) get(k kindKey) (*lockView, error) {
	if made := vs.made.Load(); made != nil {
		if v, ok := (*made)[k]; ok {
			return v, nil
		}
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.closed {
		return nil, errClosing
	}
	if v, ok := vs.m[k]; ok {
		return v, nil
	}
	if err, ok := vs.refused[k]; ok {
		return nil, err
	}
	if k.kind == v1.Kind_KIND_SEMAPHORE && vs.sems >= maxSemaphores {
		return nil, fmt.Errorf("%w: semaphores of %d different numbers of permits are in use already; the service keeps at most %d", turnstile.ErrInvalidOption, vs.sems, maxSemaphores)
	}
	stores, err := vs.make(k)
	if err != nil {
		if errors.Is(err, turnstile.ErrUnsupported) {
			vs.refused[k] = err
		}
		return nil, err
	}
	for key, store := range stores {
		c, err := turnstile.New(viewOf(store), vs.opts...)
		if err != nil {
			return nil, err
		}
		vs.m[key] = &lockView{key: key, store: store, client: c}
	}
	made := maps.Clone(vs.m)
	vs.made.Store(&made)
	if k.kind == v1.Kind_KIND_SEMAPHORE {
		vs.sems++
	}
	return vs.m[k], nil
}

// make returns the store's view for k (both sides of a read-write lock
// for either).
func (vs *views) make(k kindKey) (map[kindKey]driver.Backend, error) {
	var b driver.Backend
	var err error
	switch k.kind {
	case v1.Kind_KIND_LOCK:
		b = vs.root
	case v1.Kind_KIND_SHARED, v1.Kind_KIND_EXCLUSIVE:
		r, w, err := turnstile.ReadWrite(vs.root)
		if err != nil {
			return nil, err
		}
		return map[kindKey]driver.Backend{{kind: v1.Kind_KIND_SHARED}: r, {kind: v1.Kind_KIND_EXCLUSIVE}: w}, nil
	case v1.Kind_KIND_SEMAPHORE:
		b, err = turnstile.Semaphore(vs.root, k.permits)
	case v1.Kind_KIND_FAIR:
		b, err = turnstile.Fair(vs.root)
	case v1.Kind_KIND_REENTRANT:
		b, err = turnstile.Reentrant(vs.root)
	}
	if err != nil {
		return nil, err
	}
	return map[kindKey]driver.Backend{k: b}, nil
}

// kinds reports which kinds the store has (a semaphore: of 2 permits),
// and which of them queue their waiters in the store, for Info.
func (vs *views) kinds() (kinds, queued []v1.Kind) {
	for _, k := range []kindKey{{kind: v1.Kind_KIND_LOCK}, {kind: v1.Kind_KIND_SHARED}, {kind: v1.Kind_KIND_EXCLUSIVE}, {kind: v1.Kind_KIND_SEMAPHORE, permits: 2}, {kind: v1.Kind_KIND_FAIR}, {kind: v1.Kind_KIND_REENTRANT}} {
		v, err := vs.get(k)
		if err != nil {
			continue
		}
		kinds = append(kinds, k.kind)
		if _, ok := v.store.(driver.Queuer); ok {
			queued = append(queued, k.kind)
		}
	}
	return kinds, queued
}

// close closes every Client: the leases of Hold streams stop being
// renewed and expire after their TTL.
func (vs *views) close() {
	vs.mu.Lock()
	vs.closed = true
	m := vs.m
	vs.m = nil
	vs.made.Store(nil)
	vs.mu.Unlock()
	for _, v := range m {
		_ = v.client.Close()
	}
}
