package consume

import (
	"container/list"
	"time"

	"github.com/turnstilelock/turnstile/events"
)

// Position is where one lock key's applied events have got to: the
// fencing token, type, time and id of the last event applied for it.
// The application stores PositionOf(ev) with the change ev makes, in the
// same transaction, and returns it from its LastApplied function; the
// zero Position means that nothing was applied for the key.
//
// Positions of one key are ordered by Token, then by the stage of the
// lease the Type reports (ACQUIRED, then EXTENDED, then RELEASED, LOST
// or FORCE_RELEASED), then by Time: the order in which one lease's
// events happen, and in which a later lease (with a larger token) follows
// an earlier one.
type Position struct {
	Token uint64
	Type  string
	Time  time.Time
	ID    string
}

// PositionOf returns the position of ev.
func PositionOf(ev events.Event) Position {
	return Position{Token: ev.Token, Type: ev.Type, Time: ev.Timestamp, ID: ev.ID}
}

// IsZero reports whether p is the zero Position: nothing applied.
func (p Position) IsZero() bool { return p == Position{} }

// Before reports whether p comes strictly before q in a key's order
// (see Position). Two positions of the same token, stage and time are
// not before one another whatever their ids: the second of them is not
// applied.
func (p Position) Before(q Position) bool {
	if p.Token != q.Token {
		return p.Token < q.Token
	}
	if rp, rq := stage(p.Type), stage(q.Type); rp != rq {
		return rp < rq
	}
	return p.Time.Before(q.Time)
}

// stage ranks the event types of one lease in the order they happen.
func stage(typ string) int {
	switch typ {
	case events.TypeAcquired:
		return 1
	case events.TypeExtended:
		return 2
	case events.TypeReleased, events.TypeLost, events.TypeForceReleased:
		return 3
	}
	return 0
}

// recentIDs is how many ids of applied events a key's state keeps, so
// that a repeated event is counted as a duplicate rather than as stale.
// Only the count depends on it: a repeated event is never applied,
// whether its id is remembered or not, since its position is not after
// the key's.
const recentIDs = 4

// keyState is what the consumer remembers of one key.
type keyState struct {
	key       string
	pos       Position          // the key's position, once loaded
	loaded    bool              // pos is known: from LastApplied or an applied event
	recent    [recentIDs]string // ids of the last applied events, newest at next-1
	next      int
	topic     string // where the key's records come from, to forget
	partition int32  // the key when that partition is revoked
}

func (s *keyState) seen(id string) bool {
	if s.loaded && id == s.pos.ID {
		return true
	}
	for _, r := range s.recent {
		if r == id {
			return true
		}
	}
	return false
}

func (s *keyState) remember(id string) {
	s.recent[s.next] = id
	s.next = (s.next + 1) % recentIDs
}

// keyCache is a least-recently-used map of key states holding at most
// max keys. It is not safe for concurrent use.
type keyCache struct {
	max   int
	order *list.List // of *keyState, most recently used first
	byKey map[string]*list.Element
}

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// get returns the state of key, or nil, and marks it used.
func (c *keyCache) get(key string) *keyState {
	e, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*keyState)
}

// add stores s, forgetting the least recently used key when full.
func (c *keyCache) add(s *keyState) {
	if e, ok := c.byKey[s.key]; ok {
		e.Value = s
		c.order.MoveToFront(e)
		return
	}
	c.byKey[s.key] = c.order.PushFront(s)
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*keyState).key)
	}
}

// forget drops the keys whose records came from the given partitions.
func (c *keyCache) forget(partitions map[string][]int32) {
	for e := c.order.Front(); e != nil; {
		next := e.Next()
		s := e.Value.(*keyState)
		for _, p := range partitions[s.topic] {
			if p == s.partition {
				c.order.Remove(e)
				delete(c.byKey, s.key)
				break
			}
		}
		e = next
	}
}
