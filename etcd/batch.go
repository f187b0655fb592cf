package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The plain locks' writes of many callers go to etcd as one transaction.
//
// etcd proposes, logs and applies every transaction as an entry of its
// Raft log, and on a busy store that cost per entry, not the keys it
// writes, bounds the writes per second. So when a write finds a
// transaction of the backend on its way, it waits in line, and when that
// one is answered the line leaves as one transaction: each write a
// nested transaction with its own comparisons,
// evaluated and applied on its own, all at one revision. A lone write
// leaves at once on its caller's goroutine as a plain transaction, as it
// did before there was a line.
//
// The rules that keep each write's answer its own:
//   - Writes on one key never share a transaction, nor overtake one
//     another: a write whose key is in a transaction on its way waits for
//     that transaction's answer. The clean-up after a write whose caller
//     gave up (drop) therefore reaches etcd after that write.
//   - A write still in line when its caller's context ends leaves the
//     line unsent. Once sent it is part of a transaction that goes on
//     until etcd answers, or cleanupAttempt after the latest deadline of
//     its writes, and its caller's answer is its context's error — an
//     unknown outcome, as for a plain transaction cut off on its way.
//   - A transaction etcd refuses as a whole before applying any of it (a
//     lease not found, permission denied, too many operations, too large)
//     is sent again write by write, each on its caller's goroutine, so
//     that each write gets its own answer. After "too many operations"
//     the backend's transactions carry half as many writes from then on.
//   - Any other error (a timeout, a lost connection) is the answer of
//     every write of the transaction: their outcome is unknown.

// inFlightTxns is how many transactions of a backend's line may be on
// their way at once. Two shortened the line's wait but carried half as
// many writes per Raft entry, and through the service 30 % fewer pairs
// per second at 64 workers (docs/performance.md).
const inFlightTxns = 1

// DefaultBatch is how many writes one transaction carries at most unless
// WithBatch says otherwise. etcd refuses transactions of over 128
// operations by default (--max-txn-ops), counting a nested
// transaction's operations against what its parent leaves.
const DefaultBatch = 64

// writeState is where a write is on its way; the batcher's mutex guards
// it.
type writeState uint8

const (
	writeQueued    writeState = iota // in line
	writeSent                        // in a transaction on its way
	writeAbandoned                   // its caller left the line before it was sent
)

// write is one caller's transaction: cmps, then the ops then, else els.
type write struct {
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
	keys      []string // the keys it puts or deletes
	ctx       context.Context
	state     writeState
	done      chan writeAnswer // buffered: the sender never waits
}

// writeAnswer is a write's response, or the error of its transaction;
// alone says etcd refused the transaction as a whole without applying it,
// so the write is to be sent again by itself.
type writeAnswer struct {
	resp  *clientv3.TxnResponse
	err   error
	alone bool
}

// batcher is a backend's line of writes and the keys of its transactions
// on their way. Its mutex guards every field and every write's state.
type batcher struct {
	mu      sync.Mutex
	max     int            // writes per transaction; 1 sends each alone
	sending int            // transactions on their way
	busy    map[string]int // keys in transactions on their way
	line    []*write
}

// free reports whether no transaction on its way writes any of keys.
func (bt *batcher) free(keys []string) bool {
	for _, k := range keys {
		if bt.busy[k] > 0 {
			return false
		}
	}
	return true
}

func (bt *batcher) mark(keys []string) {
	if bt.busy == nil {
		bt.busy = make(map[string]int)
	}
	for _, k := range keys {
		bt.busy[k]++
	}
}

func (bt *batcher) unmark(keys []string) {
	for _, k := range keys {
		if bt.busy[k]--; bt.busy[k] <= 0 {
			delete(bt.busy, k)
		}
	}
}

// next takes the writes of the next transaction out of the line, when a
// transaction may go: in line order, up to max of them, skipping a write
// whose keys a transaction on its way — or a write skipped before it —
// writes. The caller sends them. Called with mu held.
func (bt *batcher) next() []*write {
	if bt.sending >= inFlightTxns || len(bt.line) == 0 {
		return nil
	}
	var (
		take    []*write
		keep    = bt.line[:0]
		skipped map[string]bool
	)
	for _, w := range bt.line {
		blocked := len(take) >= bt.max || !bt.free(w.keys)
		for _, k := range w.keys {
			blocked = blocked || skipped[k]
		}
		if blocked {
			if skipped == nil {
				skipped = make(map[string]bool)
			}
			for _, k := range w.keys {
				skipped[k] = true
			}
			keep = append(keep, w)
			continue
		}
		bt.mark(w.keys)
		w.state = writeSent
		take = append(take, w)
	}
	clear(bt.line[len(keep):])
	bt.line = keep
	if len(take) > 0 {
		bt.sending++
	}
	return take
}

// done ends the transaction of ws and takes the next one, if any.
func (bt *batcher) done(ws []*write) []*write {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.sending--
	for _, w := range ws {
		bt.unmark(w.keys)
	}
	return bt.next()
}

// leave takes w out of the line; it reports false when w was sent.
func (bt *batcher) leave(w *write) bool {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if w.state != writeQueued {
		return false
	}
	w.state = writeAbandoned
	for i, x := range bt.line {
		if x == w {
			bt.line = append(bt.line[:i:i], bt.line[i+1:]...)
			break
		}
	}
	return true
}

// txn commits If(cmps).Then(then).Else(els) — alone, or as part of a
// transaction that carries other callers' writes (see above). Writes to
// ranges of keys, and every write when batching is off, go alone.
func (b *Backend) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	keys, ok := writtenKeys(nil, then)
	if ok {
		keys, ok = writtenKeys(keys, els)
	}
	bt := &b.batch
	bt.mu.Lock()
	if !ok || bt.max <= 1 {
		bt.mu.Unlock()
		return b.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	}
	w := &write{cmps: cmps, then: then, els: els, keys: keys, ctx: ctx}
	if bt.sending < inFlightTxns && len(bt.line) == 0 && bt.free(keys) {
		// Nobody waits: go now, on this goroutine.
		bt.sending++
		bt.mark(keys)
		w.state = writeSent
		bt.mu.Unlock()
		resp, err := b.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		b.sendNext(bt.done([]*write{w}))
		return resp, err
	}
	w.done = make(chan writeAnswer, 1)
	bt.line = append(bt.line, w)
	go1 := bt.next() // a slot is free but w's key was busy: others may go
	bt.mu.Unlock()
	b.sendNext(go1)
	select {
	case a := <-w.done:
		if a.alone {
			return b.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		}
		return a.resp, a.err
	case <-ctx.Done():
		if bt.leave(w) {
			return nil, ctx.Err()
		}
		// Sent: the transaction goes on; its outcome is unknown here.
		select {
		case a := <-w.done:
			if !a.alone {
				return a.resp, a.err
			}
		default:
		}
		return nil, ctx.Err()
	}
}

// sendNext sends ws, and the transactions that follow it, on a goroutine
// of its own.
func (b *Backend) sendNext(ws []*write) {
	if len(ws) == 0 {
		return
	}
	go func() {
		for len(ws) > 0 {
			b.send(ws)
			ws = b.batch.done(ws)
		}
	}()
}

// send commits ws as one transaction and gives each write its answer.
func (b *Backend) send(ws []*write) {
	ctx, cancel := b.batchCtx(ws)
	defer cancel()
	if len(ws) == 1 {
		w := ws[0]
		resp, err := b.cli.Txn(ctx).If(w.cmps...).Then(w.then...).Else(w.els...).Commit()
		w.done <- writeAnswer{resp: resp, err: err}
		return
	}
	ops := make([]clientv3.Op, len(ws))
	for i, w := range ws {
		ops[i] = clientv3.OpTxn(w.cmps, w.then, w.els)
	}
	resp, err := b.cli.Txn(ctx).Then(ops...).Commit()
	if err == nil && len(resp.Responses) != len(ws) {
		err = errBatchAnswer
	}
	if err != nil {
		alone := refusedWhole(err)
		if alone && rpctypes.Error(err) == rpctypes.ErrTooManyOps {
			b.batch.mu.Lock()
			b.batch.max = min(b.batch.max, max(len(ws)/2, 1))
			b.batch.mu.Unlock()
		}
		for _, w := range ws {
			w.done <- writeAnswer{err: err, alone: alone}
		}
		return
	}
	for i, w := range ws {
		in := resp.Responses[i].GetResponseTxn()
		if in == nil {
			w.done <- writeAnswer{err: errBatchAnswer}
			continue
		}
		in.Header = resp.Header
		w.done <- writeAnswer{resp: (*clientv3.TxnResponse)(in)}
	}
}

// errBatchAnswer is a batched transaction's answer that does not match
// its writes; their outcome is unknown.
var errBatchAnswer = errors.New("etcd: a batched transaction's answer does not match its writes")

// batchCtx bounds a transaction of ws by the latest of their deadlines
// plus cleanupAttempt (none when one has none), and by Close. Their
// callers' cancellations do not end it, and it waits for etcd's answer a
// while after the last caller stopped waiting, so that the clean-up of a
// write given up (a drop, in line behind it) follows that answer.
func (b *Backend) batchCtx(ws []*write) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, w := range ws {
		dl, ok := w.ctx.Deadline()
		if !ok {
			last = time.Time{}
			break
		}
		if dl.After(last) {
			last = dl
		}
	}
	base := context.Background() // the callers' values are not the transaction's
	ctx, cancel := context.WithCancel(base)
	if !last.IsZero() {
		ctx, cancel = context.WithDeadline(base, last.Add(cleanupAttempt))
	}
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// refusedWhole reports whether etcd refused a transaction as a whole
// before applying any of it, for a reason that may be one write's alone.
func refusedWhole(err error) bool {
	switch rpctypes.Error(err) {
	case rpctypes.ErrLeaseNotFound, rpctypes.ErrPermissionDenied, rpctypes.ErrDuplicateKey,
		rpctypes.ErrTooManyOps, rpctypes.ErrRequestTooLarge:
		return true
	}
	return false
}

// writtenKeys appends the keys ops put or delete, within nested
// transactions too, to keys; ok is false when one of them writes a range.
func writtenKeys(keys []string, ops []clientv3.Op) (_ []string, ok bool) {
	for _, op := range ops {
		switch {
		case op.IsTxn():
			_, then, els := op.Txn()
			if keys, ok = writtenKeys(keys, then); !ok {
				return nil, false
			}
			if keys, ok = writtenKeys(keys, els); !ok {
				return nil, false
			}
		case op.IsPut() || op.IsDelete():
			if len(op.RangeBytes()) > 0 {
				return nil, false
			}
			keys = append(keys, string(op.KeyBytes()))
		}
	}
	return keys, true
}
