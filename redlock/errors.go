package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNodeTimeout is the error of a node that did not answer within the
// node timeout (WithNodeTimeout). The call may still reach the node.
var ErrNodeTimeout = errors.New("redlock: no answer within the node timeout")

// ErrNoQuorum: a call did not get a quorum of the Redlock's nodes to
// agree. Every *QuorumError matches it.
var ErrNoQuorum = errors.New("redlock: no quorum")

// QuorumError reports a call that did not get a quorum of nodes to agree:
// how many said yes (granted, extended, released, raised), how many said
// no (held by another owner, or not held by this one), how many failed,
// and how many had not answered when the outcome was decided. It matches
// ErrNoQuorum and every per-node error, so
// errors.Is(err, context.Canceled) holds when the caller gave up.
type QuorumError struct {
	Op      string // "acquire", "fence", "extend", "release", "raise fence"
	Nodes   int
	Quorum  int
	Yes     int
	No      int
	Failed  int
	Pending int
	// Elapsed is set when a quorum said yes too late: the lease had no
	// validity left after Elapsed (TTL − elapsed − drift ≤ 0).
	Elapsed time.Duration
	// Err joins the error of every failed node, each naming its node.
	Err error
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s: %s: ", e.Op, strings.TrimPrefix(ErrNoQuorum.Error(), "redlock: "))
	if e.Elapsed > 0 {
		fmt.Fprintf(&b, "quorum of %d reached after %v, too late to leave any validity; ", e.Quorum, e.Elapsed.Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "%d of %d nodes said yes, %d no, %d failed", e.Yes, e.Nodes, e.No, e.Failed)
	if e.Pending > 0 {
		fmt.Fprintf(&b, ", %d not yet answered", e.Pending)
	}
	fmt.Fprintf(&b, " (quorum %d)", e.Quorum)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.ReplaceAll(e.Err.Error(), "\n", "; "))
	}
	return b.String()
}

func (e *QuorumError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNoQuorum}
	}
	return []error{ErrNoQuorum, e.Err}
}

// NodeError is the failure of one node in a call.
type NodeError struct {
	Node string // "node 2 (redis 127.0.0.1:6380)"
	Err  error
}

func (e *NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

func (e *NodeError) Unwrap() error { return e.Err }
