package turnstile

import (
	"slices"
	"sync"
)

// A Client keeps first-come-first-served lines of its own callers, one
// per key: the waiters for a lock (coalesce.go) and the callers over a
// rate limit (admission.go). Both are a fifo inside a lineSet; what a
// line does for its waiters is its owner's business.
//
// A line leaves its set when its last waiter leaves, and is marked dead
// under its mutex at that moment: a caller that found it in the set just
// before must join a new line instead (lineSet.join retries).

// seat is a waiter's place in a line. Waiter types embed it.
type seat struct {
	turn chan struct{} // closed when the waiter becomes the head
}

func newSeat() seat { return seat{turn: make(chan struct{})} }

func (s *seat) seatOf() *seat { return s }

// seated is what a line holds: a pointer to a waiter that embeds a seat.
type seated interface {
	comparable
	seatOf() *seat
}

// fifo is one key's line. Owners embed it; its mu guards their state too.
type fifo[W seated] struct {
	mu      sync.Mutex
	key     string
	waiters []W  // arrival order; waiters[0] is the head
	dead    bool // out of its set: join a new line
}

func (f *fifo[W]) fifoOf() *fifo[W] { return f }

// position is w's place, 1 for the head, 0 if it is not in the line.
// Caller holds f.mu.
func (f *fifo[W]) position(w W) int { return slices.Index(f.waiters, w) + 1 }

// lineOf is a line type: a pointer to a struct that embeds a fifo.
type lineOf[W seated] interface {
	comparable
	fifoOf() *fifo[W]
}

// lineSet holds one line per key. Its zero value is empty and ready.
type lineSet[W seated, L lineOf[W]] struct {
	m sync.Map // key → L
}

// load returns key's line, if there is one.
func (s *lineSet[W, L]) load(key string) (L, bool) {
	v, ok := s.m.Load(key)
	if !ok {
		var none L
		return none, false
	}
	return v.(L), true
}

// busy reports whether callers wait in key's line.
func (s *lineSet[W, L]) busy(key string) bool {
	ln, ok := s.load(key)
	if !ok {
		return false
	}
	f := ln.fifoOf()
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.dead && len(f.waiters) > 0
}

// join puts w at the tail of key's line, starting the line with fresh if
// there is none. A waiter that arrives at an empty line is its head at
// once.
func (s *lineSet[W, L]) join(key string, w W, fresh func() L) L {
	for {
		ln, ok := s.load(key)
		if !ok {
			n := fresh()
			n.fifoOf().key = key
			v, _ := s.m.LoadOrStore(key, n)
			ln = v.(L)
		}
		f := ln.fifoOf()
		f.mu.Lock()
		if f.dead {
			f.mu.Unlock()
			continue
		}
		f.waiters = append(f.waiters, w)
		if len(f.waiters) == 1 {
			close(w.seatOf().turn)
		}
		f.mu.Unlock()
		return ln
	}
}

// remove takes w out of ln; the caller holds ln's mu. If w was the head,
// the next waiter becomes it: promote (if set) runs first, for what the
// new head reads once its turn comes, then its turn channel is closed.
// A line left empty leaves the set, and remove reports that.
func (s *lineSet[W, L]) remove(ln L, w W, promote func(next W)) (emptied bool) {
	f := ln.fifoOf()
	if i := slices.Index(f.waiters, w); i >= 0 {
		f.waiters = slices.Delete(f.waiters, i, i+1)
		if i == 0 && len(f.waiters) > 0 {
			next := f.waiters[0]
			if promote != nil {
				promote(next)
			}
			close(next.seatOf().turn)
		}
	}
	if len(f.waiters) > 0 || f.dead {
		return false
	}
	f.dead = true
	s.m.CompareAndDelete(f.key, ln)
	return true
}
