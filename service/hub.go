package service

import (
	"strings"
	"sync"
	"sync/atomic"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// watchBuffer is how many events a watcher may fall behind before its
// stream is ended (it can watch again): an instance never waits for a
// slow watcher.
const watchBuffer = 256

// hub passes the instance's own lock events to the Watch streams of
// this instance that want them.
type hub struct {
	// watchers counts the watchers, so that an instance nobody watches
	// makes no event at all.
	watchers atomic.Int64

	mu       sync.Mutex
	keys     map[string]map[*watcher]struct{}
	prefixes map[*watcher]struct{}
}

// watcher is one Watch stream.
type watcher struct {
	key    string
	prefix bool
	ch     chan *v1.Event
	// over is closed when the watcher fell behind by watchBuffer events.
	over     chan struct{}
	overOnce sync.Once
}

func newHub() *hub {
	return &hub{keys: map[string]map[*watcher]struct{}{}, prefixes: map[*watcher]struct{}{}}
}

// watch adds a watcher of key (a prefix if prefix) and returns it with
// the function that removes it.
func (h *hub) watch(key string, prefix bool) (*watcher, func()) {
	w := &watcher{key: key, prefix: prefix, ch: make(chan *v1.Event, watchBuffer), over: make(chan struct{})}
	h.mu.Lock()
	if prefix {
		h.prefixes[w] = struct{}{}
	} else {
		set := h.keys[key]
		if set == nil {
			set = map[*watcher]struct{}{}
			h.keys[key] = set
		}
		set[w] = struct{}{}
	}
	h.watchers.Add(1)
	h.mu.Unlock()
	return w, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.watchers.Add(-1)
		if prefix {
			delete(h.prefixes, w)
			return
		}
		delete(h.keys[key], w)
		if len(h.keys[key]) == 0 {
			delete(h.keys, key)
		}
	}
}

// watched reports whether anyone watches: an event made while nobody
// does would reach nobody. A watcher that starts meanwhile sees the
// events from its start, as it would anyway.
func (h *hub) watched() bool { return h.watchers.Load() > 0 }

// publish gives e to every watcher of its key, without waiting.
func (h *hub) publish(e *v1.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.keys[e.Key] {
		w.offer(e)
	}
	for w := range h.prefixes {
		if strings.HasPrefix(e.Key, w.key) {
			w.offer(e)
		}
	}
}

func (w *watcher) offer(e *v1.Event) {
	select {
	case w.ch <- e:
	default:
		w.overOnce.Do(func() { close(w.over) })
	}
}
