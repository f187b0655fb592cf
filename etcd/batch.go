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
// writes, bounds the writes per second. So when a write finds as many
// transactions of the backend's line on their way as may be
// (inFlightTxns), it waits in line, and when one of them is answered the
// line leaves as one transaction: each
// write a nested transaction with its own comparisons, evaluated and
// applied on its own, all at one revision. A lone write leaves at once
// on its caller's goroutine as a plain transaction, as it did before
// there was a line.
//
// The rules that keep each write's answer its own:
//   - One owner's writes on one key keep their order: a write whose owner
//     has a write on that key in line or on its way waits in line behind
//     it. The clean-up after a write whose caller gave up (drop)
//     therefore reaches etcd after that write.
//   - Two writes on one key never share a transaction (etcd refuses one
//     that writes a key twice). A write on a key that another owner's
//     write in line or on its way also writes goes alone at once, beside
//     them, as every write did before there was a line: a hot key's
//     waiters and hand-offs do not wait for one another's answers.
//   - A write still in line when its caller's context ends leaves the
//     line unsent. Once sent it is part of a transaction that goes on
//     until etcd answers, or cleanupAttempt after the latest deadline of
//     its writes, or lineTimeout, and its caller's answer is its
//     context's error — an unknown outcome, as for a plain transaction
//     cut off on its way.
//   - A transaction etcd refuses as a whole before applying any of it (a
//     lease not found, permission denied, too many operations, too large)
//     is sent again write by write, each on its caller's goroutine, so
//     that each write gets its own answer. After "too many operations"
//     the backend's transactions carry half as many writes from then on.
//   - Any other error (a timeout, a lost connection) is the answer of
//     every write of the transaction: their outcome is unknown.

// inFlightTxns is how many transactions of a backend's line may be on
// their way at once. With one, etcd waited between the line's
// transactions: through the service, whose batches join the line
// together (DoMany), two gave more pairs per second at 64 workers in six
// passes of six, the library's own pairs as many; with each op waiting
// in line on a goroutine of its own, one had been faster
// (docs/performance.md).
const inFlightTxns = 2

// lineTimeout bounds how long a transaction of the line — a lone write,
// or a batch — waits for etcd's answer, whatever its callers' deadlines:
// every write behind it waits as long. etcd answers a proposal it cannot
// commit after its request timeout (7 s by default), but a write lost as
// its leader died, or sent on a connection that drops everything, is
// answered only at its deadline; with none, the line would stop for good.
// Its writes then end with DeadlineExceeded, an unknown outcome.
var lineTimeout = 10 * time.Second

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
	order     string // its key and owner: their writes keep their order
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
	keys      []string // the keys it puts or deletes
	ranged    bool     // it writes a range of keys: it goes alone
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

// batcher is a backend's line of writes, and what the writes in line or
// on their way hold up. Its mutex guards every field and every write's
// state.
type batcher struct {
	mu      sync.Mutex
	max     int            // writes per transaction; 1 sends each alone
	sending int            // transactions of the line on their way
	orders  map[string]int // orders of the writes in line or on their way
	sent    map[string]int // orders of the writes on their way
	written map[string]int // keys the writes in line or on their way write
	line    []*write
}

func count(m *map[string]int, k string, d int) {
	if *m == nil {
		*m = make(map[string]int)
	}
	if (*m)[k] += d; (*m)[k] <= 0 {
		delete(*m, k)
	}
}

// join counts w as in line or on its way.
func (bt *batcher) join(w *write) {
	count(&bt.orders, w.order, 1)
	for _, k := range w.keys {
		count(&bt.written, k, 1)
	}
}

// leaveAll uncounts w: it was answered, or left the line.
func (bt *batcher) leaveAll(w *write) {
	count(&bt.orders, w.order, -1)
	if w.state == writeSent {
		count(&bt.sent, w.order, -1)
	}
	for _, k := range w.keys {
		count(&bt.written, k, -1)
	}
}

func (bt *batcher) send(w *write) {
	w.state = writeSent
	count(&bt.sent, w.order, 1)
}

// writing reports whether a write in line or on its way writes one of
// keys.
func (bt *batcher) writing(keys []string) bool {
	for _, k := range keys {
		if bt.written[k] > 0 {
			return true
		}
	}
	return false
}

// next takes the writes of the next transaction out of the line, when a
// transaction may go: in line order, up to max of them, skipping a write
// whose order has a write on its way or one skipped before it, and a
// write on a key the transaction writes already. The caller sends them.
// Called with mu held.
func (bt *batcher) next() []*write {
	if bt.sending >= inFlightTxns || len(bt.line) == 0 {
		return nil
	}
	var (
		take    []*write
		keep    = bt.line[:0]
		skipped map[string]bool
		keys    = make(map[string]bool)
	)
	for _, w := range bt.line {
		blocked := len(take) >= bt.max || bt.sent[w.order] > 0 || skipped[w.order]
		for _, k := range w.keys {
			blocked = blocked || keys[k]
		}
		if blocked {
			if skipped == nil {
				skipped = make(map[string]bool)
			}
			skipped[w.order] = true
			keep = append(keep, w)
			continue
		}
		for _, k := range w.keys {
			keys[k] = true
		}
		bt.send(w)
		take = append(take, w)
	}
	clear(bt.line[len(keep):])
	bt.line = keep
	if len(take) > 0 {
		bt.sending++
	}
	return take
}

// done ends ws's transaction — of the line when ofLine — and takes the
// next one, if any.
func (bt *batcher) done(ws []*write, ofLine bool) []*write {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if ofLine {
		bt.sending--
	}
	for _, w := range ws {
		bt.leaveAll(w)
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
	bt.leaveAll(w)
	w.state = writeAbandoned
	for i, x := range bt.line {
		if x == w {
			bt.line = append(bt.line[:i:i], bt.line[i+1:]...)
			break
		}
	}
	return true
}

// txn commits If(cmps).Then(then).Else(els), owner's write on lock key
// lk — alone, or as part of a transaction that carries other callers'
// writes (see above). Writes to ranges of keys, and every write when
// batching is off, go alone.
func (b *Backend) txn(ctx context.Context, lk, owner string, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	return b.commitWrite(ctx, newWrite(lk, owner, cmps, then, els))
}

// newWrite is owner's write on lock key lk: If(cmps).Then(then).Else(els).
func newWrite(lk, owner string, cmps []clientv3.Cmp, then, els []clientv3.Op) *write {
	keys, ok := writtenKeys(nil, then)
	if ok {
		keys, ok = writtenKeys(keys, els)
	}
	return &write{order: lk + "\x00" + owner, cmps: cmps, then: then, els: els, keys: keys, ranged: !ok}
}

// commitWrite commits w as txn does, for ctx's caller.
func (b *Backend) commitWrite(ctx context.Context, w *write) (*clientv3.TxnResponse, error) {
	w.ctx = ctx
	bt := &b.batch
	bt.mu.Lock()
	if w.ranged || bt.max <= 1 {
		bt.mu.Unlock()
		return b.commitAlone(ctx, w)
	}
	if bt.orders[w.order] == 0 {
		// Another owner's write on the key is in line or on its way: go
		// beside it. Or nobody waits: go now, as the line's transaction.
		// Either way alone, on this goroutine.
		beside := bt.writing(w.keys)
		ofLine := !beside && bt.sending < inFlightTxns && len(bt.line) == 0
		if beside || ofLine {
			bt.sendAlone(w, ofLine)
			bt.mu.Unlock()
			a := b.commitSent(ctx, w, ofLine)
			return a.resp, a.err
		}
	}
	bt.enqueue(w)
	go1 := bt.next() // w may go at once, behind its order's write just answered
	bt.mu.Unlock()
	b.sendNext(go1)
	a := b.await(ctx, w)
	if a.alone {
		// Refused as a whole: sent again by itself.
		return b.commitAlone(ctx, w)
	}
	return a.resp, a.err
}

// sendAlone counts w as on its way by itself: as the line's transaction
// when ofLine, else beside the line. Called with mu held.
func (bt *batcher) sendAlone(w *write, ofLine bool) {
	if ofLine {
		bt.sending++
	}
	bt.join(w)
	bt.send(w)
}

// commitSent commits w, counted by sendAlone, by itself — within
// lineTimeout when it is the line's transaction — and then lets the
// line go on.
func (b *Backend) commitSent(ctx context.Context, w *write, ofLine bool) writeAnswer {
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if ofLine {
		tctx, cancel = context.WithTimeout(ctx, lineTimeout)
	}
	a := b.answerAlone(tctx, w)
	cancel()
	b.sendNext(b.batch.done([]*write{w}, ofLine))
	return a
}

// answerAlone commits w as a transaction of its own, and is its answer.
func (b *Backend) answerAlone(ctx context.Context, w *write) writeAnswer {
	resp, err := b.commitAlone(ctx, w)
	return writeAnswer{resp: resp, err: err}
}

// enqueue puts w in line. Called with mu held.
func (bt *batcher) enqueue(w *write) {
	w.done = make(chan writeAnswer, 1)
	bt.join(w)
	bt.line = append(bt.line, w)
}

// await waits for the answer of w, put in line for ctx's caller. When
// ctx ends first, w leaves the line if it is still there; once sent, its
// outcome is unknown and the answer is ctx's error.
func (b *Backend) await(ctx context.Context, w *write) writeAnswer {
	select {
	case a := <-w.done:
		return a
	case <-ctx.Done():
		if b.batch.leave(w) {
			return writeAnswer{err: ctx.Err()}
		}
		// Sent: the transaction goes on; its outcome is unknown here.
		select {
		case a := <-w.done:
			if !a.alone {
				return a
			}
		default:
		}
		return writeAnswer{err: ctx.Err()}
	}
}

// txns commits ws, the writes of one caller made at once (a Batcher's
// ops), each as commitWrite would, and answers them in their order —
// without a goroutine per write. Those that may share the line's
// transaction join the line together, and when the line may send one
// more transaction it leaves at once, on this goroutine. The
// others go alone, each on a goroutine of its own, as concurrent calls
// would: writes to ranges of keys, every write when batching is off, and
// writes on a key another owner's write in line or on its way writes
// (two of ws on one key are two such owners' writes).
func (b *Backend) txns(ctx context.Context, ws []*write) []writeAnswer {
	out := make([]writeAnswer, len(ws))
	var (
		wg    sync.WaitGroup
		lined []int
	)
	bt := &b.batch
	bt.mu.Lock()
	for i, w := range ws {
		w.ctx = ctx
		switch {
		case w.ranged || bt.max <= 1:
			wg.Go(func() { out[i] = b.answerAlone(ctx, w) })
		case bt.orders[w.order] == 0 && bt.writing(w.keys):
			bt.sendAlone(w, false)
			wg.Go(func() { out[i] = b.commitSent(ctx, w, false) })
		default:
			bt.enqueue(w)
			lined = append(lined, i)
		}
	}
	go1 := bt.next()
	bt.mu.Unlock()
	if len(go1) > 0 {
		b.commit(go1)
		b.sendNext(bt.done(go1, true))
	}
	for _, i := range lined {
		if out[i] = b.await(ctx, ws[i]); out[i].alone {
			// Refused as a whole: each write again by itself, at once.
			wg.Go(func() { out[i] = b.answerAlone(ctx, ws[i]) })
		}
	}
	wg.Wait()
	return out
}

// sendNext sends ws, and the transactions that follow it, on a goroutine
// of its own.
func (b *Backend) sendNext(ws []*write) {
	if len(ws) == 0 {
		return
	}
	go func() {
		for len(ws) > 0 {
			b.commit(ws)
			ws = b.batch.done(ws, true)
		}
	}()
}

// commit commits ws as one transaction and gives each write its answer.
func (b *Backend) commit(ws []*write) {
	ctx, cancel := b.batchCtx(ws)
	defer cancel()
	if len(ws) == 1 {
		resp, err := b.commitAlone(ctx, ws[0])
		ws[0].done <- writeAnswer{resp: resp, err: err}
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

// commitAlone commits w as a transaction of its own.
func (b *Backend) commitAlone(ctx context.Context, w *write) (*clientv3.TxnResponse, error) {
	return b.cli.Txn(ctx).If(w.cmps...).Then(w.then...).Else(w.els...).Commit()
}

// errBatchAnswer is a batched transaction's answer that does not match
// its writes; their outcome is unknown.
var errBatchAnswer = errors.New("etcd: a batched transaction's answer does not match its writes")

// batchCtx bounds a transaction of ws by the latest of their deadlines
// plus cleanupAttempt, by lineTimeout, and by Close. Their callers'
// cancellations do not end it, and it waits for etcd's answer a while
// after the last caller stopped waiting, so that the clean-up of a write
// given up (a drop, in line behind it) follows that answer.
func (b *Backend) batchCtx(ws []*write) (context.Context, context.CancelFunc) {
	end := time.Now().Add(lineTimeout)
	var last time.Time
	for _, w := range ws {
		dl, ok := w.ctx.Deadline()
		if !ok {
			last = end
			break
		}
		if dl = dl.Add(cleanupAttempt); dl.After(last) {
			last = dl
		}
	}
	if last.After(end) {
		last = end
	}
	// The callers' values are not the transaction's.
	ctx, cancel := context.WithDeadline(context.Background(), last)
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
