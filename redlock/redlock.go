package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Backend is a lock store made of independent stores: a lock is held when
// a quorum of them holds it. It is safe for concurrent use. The zero value
// is not usable; call New, Dial or turnstile.Open.
type Backend struct {
	nodes  []node
	all    []int // 0..len(nodes)-1: every node, for calls that go to all
	quorum int
	cfg    config
	maxTTL time.Duration    // the shortest restart quarantine of the nodes; 0: no limit
	room   uint64           // driver.TokenRoom: the nodes' common room, with fencing; else 0
	extra  []io.Closer      // clients Dial created, closed after the nodes
	now    func() time.Time // time.Now; tests move it to use up a lease's validity

	mu      sync.RWMutex // guards closed against bg.Add
	closed  bool
	done    chan struct{}  // closed by Close: ends release subscriptions
	bg      sync.WaitGroup // every goroutine a call started
	pending tracker        // cleanups and late answers, per key and owner
	views   []*Backend     // the lock kinds' views made from it (kinds.go), closed with it
}

// node is one member store and the capabilities it has.
type node struct {
	index  int
	b      driver.Backend
	name   string               // "node 2 (redis 127.0.0.1:6380)"
	fencer driver.Fencer        // nil if it cannot raise tokens
	batch  driver.BatchExtender // nil if it cannot batch renewals
	notify driver.Notifier      // nil if it cannot tell releases
	clock  clockedNode          // nil if its tokens do not start from a clock reading
}

// clockedNode is a node whose tokens start from a reading of its server's
// clock that the caller may give (redis.Backend): Acquire gives every
// node the latest of their readings, so that a key new to all of them
// gets one token everywhere and no node's fence needs raising.
type clockedNode interface {
	ClockReading() uint64
	AcquireAt(ctx context.Context, key, owner string, ttl time.Duration, clock uint64) (uint64, bool, error)
}

var (
	_ driver.Backend        = (*Backend)(nil)
	_ driver.BatchExtender  = (*Backend)(nil)
	_ driver.Fencer         = (*Backend)(nil)
	_ driver.TokenRoom      = (*Backend)(nil)
	_ driver.NoticeReleaser = (*Backend)(nil)
	_ driver.Notifier       = (*Backend)(nil)
	_ driver.Namer          = (*Backend)(nil)
	_ io.Closer             = (*Backend)(nil)
)

var errClosed = fmt.Errorf("redlock: %w", turnstile.ErrClosed)

// New returns a Redlock over nodes, which must be independent stores (not
// replicas of each other): a lock is granted when more than half of them,
// nodes/2+1, grant it. Any number of nodes works; an odd number gets the
// most from each (4 nodes tolerate one failure, as 3 do). Each node must
// be a distinct value and, unless WithoutFencing is given, a
// driver.Fencer. The caller keeps owning the nodes unless WithCloseNodes
// is given.
//
// The TTL of every call must not exceed the shortest restart quarantine
// of the nodes that report one (redis.Backend.RestartQuarantine): a longer
// lease could outlive a restarted node's quarantine.
func New(nodes []driver.Backend, opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	return newBackend(nodes, cfg)
}

func newBackend(nodes []driver.Backend, cfg config) (*Backend, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: redlock needs at least one node", turnstile.ErrInvalidOption)
	}
	b := &Backend{cfg: cfg, quorum: len(nodes)/2 + 1, done: make(chan struct{}), now: time.Now}
	for i, nb := range nodes {
		if driver.IsNil(nb) {
			return nil, fmt.Errorf("%w: redlock node %d is nil", turnstile.ErrInvalidOption, i+1)
		}
		for j := range i {
			if driver.Same(nodes[j], nb) {
				return nil, fmt.Errorf("%w: redlock nodes %d and %d are the same backend; a quorum needs independent stores", turnstile.ErrInvalidOption, j+1, i+1)
			}
		}
		n := node{index: i, b: nb, name: "node " + strconv.Itoa(i+1) + " (" + driver.Name(nb) + ")"}
		n.fencer, _ = nb.(driver.Fencer)
		n.batch, _ = nb.(driver.BatchExtender)
		n.notify, _ = nb.(driver.Notifier)
		n.clock, _ = nb.(clockedNode)
		if n.fencer == nil && cfg.fencing {
			return nil, fmt.Errorf("%w: redlock %s cannot raise fencing tokens (driver.Fencer), so tokens could go backwards across nodes; use nodes that can, or redlock.WithoutFencing", turnstile.ErrInvalidOption, n.name)
		}
		if q, ok := nb.(interface{ RestartQuarantine() time.Duration }); ok && q.RestartQuarantine() > 0 {
			if b.maxTTL == 0 || q.RestartQuarantine() < b.maxTTL {
				b.maxTTL = q.RestartQuarantine()
			}
		}
		b.nodes = append(b.nodes, n)
		b.all = append(b.all, i)
	}
	b.room = commonRoom(nodes, cfg.fencing)
	return b, nil
}

// commonRoom is the room between grants' tokens that every node leaves
// (driver.TokenRoom), if they all leave the same and fencing is on; else
// 0. A Redlock token is the largest of its quorum's, a multiple of the
// room, and is written back to a quorum, so every later quorum meets a
// node whose next token is at least the room above it.
func commonRoom(nodes []driver.Backend, fencing bool) uint64 {
	if !fencing {
		return 0
	}
	var room uint64
	for i, nb := range nodes {
		tr, ok := nb.(driver.TokenRoom)
		if !ok || tr.TokenRoom() < 2 || (i > 0 && tr.TokenRoom() != room) {
			return 0
		}
		room = tr.TokenRoom()
	}
	return room
}

// TokenRoom implements driver.TokenRoom: the room every node leaves
// between grants, when they agree and fencing is on; otherwise 0, and a
// Client hands nothing over without the nodes.
func (b *Backend) TokenRoom() uint64 { return b.room }

// Name implements driver.Namer: "redlock" and the names of the nodes.
func (b *Backend) Name() string {
	names := make([]string, len(b.nodes))
	for i, n := range b.nodes {
		names[i] = driver.Name(n.b)
	}
	return "redlock(" + strings.Join(names, ", ") + ")"
}

// HoldsTTL implements driver.TTLHolder when every node does: each node
// holds the lock for the TTL it was sent, and a quorum of them must be
// free before the lock is granted again. A Redlock of the nodes' lock
// kinds does not offer it.
func (b *Backend) HoldsTTL() bool {
	for _, n := range b.nodes {
		if !driver.HoldsTTL(n.b) {
			return false
		}
	}
	return true
}

// Quorum returns how many nodes must agree: len(nodes)/2 + 1.
func (b *Backend) Quorum() int { return b.quorum }

// Close waits for the calls still running on nodes in the background
// (answers after an early return, releases after a failed acquisition),
// each bounded by the node timeout, and then closes the nodes if the
// Backend owns them. Later calls fail with an error matching
// turnstile.ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	b.mu.Unlock()
	var errs []error
	if err := b.closeViews(); err != nil {
		errs = append(errs, err)
	}
	b.bg.Wait()
	if b.cfg.closeNodes {
		for _, n := range b.nodes {
			if c, ok := n.b.(io.Closer); ok {
				if err := c.Close(); err != nil {
					errs = append(errs, fmt.Errorf("redlock: close %s: %w", n.name, err))
				}
			}
		}
	}
	for _, c := range b.extra {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// spawn runs f in a goroutine that Close waits for. It returns false, and
// does not run f, once the Backend is closed.
func (b *Backend) spawn(f func()) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	b.bg.Go(f)
	return true
}

// check refuses calls that cannot be served: a closed Backend, a done
// context, a TTL longer than the nodes' restart quarantine.
func (b *Backend) check(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return errClosed
	}
	if b.maxTTL > 0 && ttl > b.maxTTL {
		return fmt.Errorf("%w: redlock ttl %v is longer than the nodes' restart quarantine %v: a node that restarted empty could grant a lock still held elsewhere", turnstile.ErrInvalidTTL, ttl, b.maxTTL)
	}
	return ctx.Err()
}
