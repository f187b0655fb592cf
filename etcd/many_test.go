package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func acquireOp(key, owner string) driver.Op {
	return driver.Op{Kind: driver.OpAcquire, Key: key, Owner: owner, TTL: 10 * time.Second}
}

func releaseOp(key, owner string) driver.Op {
	return driver.Op{Kind: driver.OpRelease, Key: key, Owner: owner}
}

// TestDoMany: a batch's acquisitions and releases go to etcd as one
// transaction, and each gets the answer its own call would have had:
// free keys are taken, a key another owner holds is not, one the owner
// holds is taken again; a release deletes the owner's key and no other.
// Every token is the transaction's revision, the keys' in etcd.
func TestDoMany(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	lk := b.LockKey
	put := func(key, owner string) {
		t.Helper()
		if _, err := raw.Put(ctx, lk(key), owner); err != nil {
			t.Fatal(err)
		}
	}
	put("held", "other")
	put("mine", "me")
	put("release-mine", "me")
	put("release-other", "other")
	// The shared lease, granted beforehand.
	if _, ok, err := b.Acquire(ctx, "warm-up", "me", 10*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := len(g.log())
	ops := []driver.Op{
		acquireOp("held", "me"), acquireOp("mine", "me"), acquireOp("a", "me"), acquireOp("b", "you"),
		releaseOp("release-mine", "me"), releaseOp("release-other", "me"), releaseOp("nobody's", "me"),
		releaseOp("warm-up", "me"),
	}
	start := time.Now()
	res := b.DoMany(ctx, ops)
	sent := g.log()[before:]
	if len(sent) != 1 || sent[0].writes != len(ops) {
		t.Fatalf("the batch went as %+v; want one transaction of %d writes", sent, len(ops))
	}
	for i, want := range []bool{false, true, true, true, true, false, false, true} {
		r := res[i]
		if r.Err != nil || r.OK != want {
			t.Errorf("op %d %+v: %+v, want ok %v", i, ops[i], r, want)
		}
	}
	var rev uint64
	for i, op := range ops[:4] {
		r := res[i]
		if !r.OK {
			continue
		}
		if rev == 0 {
			rev = r.Token
		}
		if r.Token != rev {
			t.Errorf("%s: token %d, want the transaction's revision %d", op.Key, r.Token, rev)
		}
		if r.Since.IsZero() || r.Since.After(time.Now()) || r.Since.Before(start.Add(-time.Second)) {
			t.Errorf("%s: since %v, the batch began at %v", op.Key, r.Since, start)
		}
		got, err := raw.Get(ctx, lk(op.Key))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != op.Owner || uint64(got.Kvs[0].ModRevision) != r.Token || got.Kvs[0].Lease == 0 {
			t.Errorf("%s in etcd: %v, want %s's at revision %d under a lease", op.Key, got.Kvs, op.Owner, r.Token)
		}
	}
	for key, want := range map[string]string{"held": "other", "release-other": "other", "release-mine": "", "warm-up": ""} {
		got, err := raw.Get(ctx, lk(key))
		if err != nil {
			t.Fatal(err)
		}
		have := ""
		if len(got.Kvs) == 1 {
			have = string(got.Kvs[0].Value)
		}
		if have != want {
			t.Errorf("%s in etcd: %v, want %q", key, got.Kvs, want)
		}
	}
	// The releases are the backend's: a renewal of a released lock finds
	// it gone.
	if ok, err := b.Extend(ctx, "release-mine", "me", 10*time.Second); ok || err != nil {
		t.Errorf("extend after the batch's release: %v %v", ok, err)
	}
	if ok, err := b.Extend(ctx, "a", "me", 10*time.Second); !ok || err != nil {
		t.Errorf("extend of the batch's grant: %v %v", ok, err)
	}
}

// TestDoManyOnOneKey: two owners' acquisitions of one key in one batch
// are made as two concurrent calls: one takes it, the other finds it
// held; etcd never sees a transaction that writes the key twice.
func TestDoManyOnOneKey(t *testing.T) {
	e := newGated(t)
	ctx, g, b := e.ctx, e.g, e.b
	for i := range 10 {
		key := fmt.Sprint("k", i)
		res := b.DoMany(ctx, []driver.Op{acquireOp(key, "a"), acquireOp(key, "b"), acquireOp(key+"-other", "a")})
		for j, r := range res {
			if r.Err != nil {
				t.Fatalf("round %d, op %d: %v", i, j, r.Err)
			}
		}
		if res[0].OK == res[1].OK || !res[2].OK {
			t.Fatalf("round %d: %+v; want exactly one owner of %s", i, res, key)
		}
	}
	for _, s := range g.log() {
		if s.err != nil {
			t.Fatalf("a transaction on %v failed: %v", s.keys, s.err)
		}
	}
}

// TestDoManyKeepsTheLine: a batch joins the backend's line of writes. A
// release of a key whose owner's acquisition waits in line goes after
// that acquisition's answer, never in the same transaction nor before
// it, as the clean-up of an acquisition given up must; the batch's other
// writes go with the write in line.
func TestDoManyKeepsTheLine(t *testing.T) {
	e := newGated(t)
	raw, ctx, g, b := e.raw, e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	acquired := make(chan error, 1)
	go func() {
		_, ok, err := b.Acquire(ctx, "k", "me", 10*time.Second)
		if err == nil && !ok {
			err = errors.New("not taken")
		}
		acquired <- err
	}()
	waitInLine(t, b, 1)
	var res []driver.OpResult
	batch := make(chan struct{})
	go func() {
		defer close(batch)
		res = b.DoMany(ctx, []driver.Op{releaseOp("k", "me"), acquireOp("j", "me")})
	}()
	waitInLine(t, b, 3)
	release()
	h := g.next(t)
	k, j := b.LockKey("k"), b.LockKey("j")
	if h.writes != 2 || !slices.Contains(h.keys, k) || !slices.Contains(h.keys, j) {
		t.Fatalf("first transaction: %d writes on %v, want the acquisitions of k and j", h.writes, h.keys)
	}
	g.none(t, "the release of k before its acquisition was answered")
	close(h.release)
	h = g.next(t)
	if h.writes != 1 || !slices.Contains(h.keys, k) {
		t.Fatalf("second transaction: %d writes on %v, want k's release alone", h.writes, h.keys)
	}
	g.open()
	close(h.release)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	<-batch
	if r := res[0]; !r.OK || r.Err != nil {
		t.Errorf("release of k: %+v", r)
	}
	if r := res[1]; !r.OK || r.Err != nil {
		t.Errorf("acquisition of j: %+v", r)
	}
	if got, _ := raw.Get(ctx, k); len(got.Kvs) != 0 {
		t.Errorf("k in etcd after its release: %v", got.Kvs)
	}
}

// TestDoManyRenewsEachLeaseOnce: a batch's acquisitions renew their
// shared lease beside their transaction when AcquireSince would — once
// for the batch — and each grant's since is then no earlier than the
// batch.
func TestDoManyRenewsEachLeaseOnce(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srv := testserver.StartEtcd(t)
	var n sent
	b := countingBackend(t, srv, &n)
	const ttl = 10 * time.Second
	if _, ok, err := b.Acquire(ctx, "warm-up", "me", ttl); !ok || err != nil {
		t.Fatal(ok, err)
	}
	batch := func(round int) (time.Time, []driver.OpResult) {
		var ops []driver.Op
		for i := range 8 {
			ops = append(ops, driver.Op{Kind: driver.OpAcquire, Key: fmt.Sprint(round, "-", i), Owner: "me", TTL: ttl})
		}
		n.take()
		start := time.Now()
		res := b.DoMany(ctx, ops)
		for i, r := range res {
			if !r.OK || r.Err != nil {
				t.Fatalf("round %d, op %d: %+v", round, i, r)
			}
		}
		return start, res
	}
	start, res := batch(0)
	if got := n.take(); got["Txn"] != 1 || got["LeaseKeepAlive"] != 0 || len(got) != 1 {
		t.Fatalf("a batch on a lease renewed just now sent %v; want one Txn", got)
	}
	for _, r := range res {
		if !r.Since.Before(start) {
			t.Fatalf("not renewed, yet since %v is after the batch began", r.Since.Sub(start))
		}
	}
	b.AgeLeases(ttl / 5)
	start, res = batch(1)
	if got := n.take(); got["Txn"] != 1 || got["LeaseKeepAlive"] != 1 || len(got) != 2 {
		t.Fatalf("a batch on a lease renewed a fifth of the TTL ago sent %v; want one Txn and one renewal", got)
	}
	for _, r := range res {
		if r.Since.Before(start) || r.Since.After(time.Now()) {
			t.Fatalf("renewed, yet since is %v from the batch's start", r.Since.Sub(start))
		}
	}
}

// TestDoManyOnAnEndedLease: when the shared lease ended on the server
// (revoked here), the batch's transaction is refused; each acquisition
// is then made as its own call would be, on a new lease.
func TestDoManyOnAnEndedLease(t *testing.T) {
	e := newGated(t)
	raw, ctx, b := e.raw, e.ctx, e.b
	if _, ok, err := b.Acquire(ctx, "warm-up", "me", 10*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	got, err := raw.Get(ctx, b.LockKey("warm-up"))
	if err != nil || len(got.Kvs) != 1 {
		t.Fatal(got, err)
	}
	old := clientv3.LeaseID(got.Kvs[0].Lease)
	if _, err := raw.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	var ops []driver.Op
	for i := range 6 {
		ops = append(ops, acquireOp(fmt.Sprint("k", i), "me"))
	}
	for i, r := range b.DoMany(ctx, ops) {
		if !r.OK || r.Err != nil {
			t.Fatalf("op %d on an ended lease: %+v", i, r)
		}
		got, err := raw.Get(ctx, b.LockKey(ops[i].Key))
		if err != nil || len(got.Kvs) != 1 || got.Kvs[0].Lease == 0 || clientv3.LeaseID(got.Kvs[0].Lease) == old {
			t.Fatalf("%s in etcd: %v %v; want it under a new lease", ops[i].Key, got, err)
		}
	}
}

// TestDoManyHandsToAWaiter: a batch's release of a key that a waiter of
// the backend's own waits for hands the lock to it, as Release does.
func TestDoManyHandsToAWaiter(t *testing.T) {
	e := newGated(t)
	ctx, b := e.ctx, e.b
	tok, ok, err := b.Acquire(ctx, "k", "holder", 10*time.Second)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	got := make(chan uint64, 1)
	go func() {
		tok, err := b.AcquireWait(ctx, "k", "waiter", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- tok
	}()
	for deadline := time.Now().Add(30 * time.Second); b.LocalWaiters("k") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
	}
	res := b.DoMany(ctx, []driver.Op{releaseOp("k", "holder")})
	if !res[0].OK || res[0].Err != nil {
		t.Fatalf("release: %+v", res[0])
	}
	select {
	case next := <-got:
		if next <= tok {
			t.Fatalf("the waiter's token %d, the holder's %d", next, tok)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never got the lock")
	}
}

// TestDoManyAfterItsContext: a batch whose context has ended sends
// nothing and answers each op with the context's error; a batch with
// ops of no kind answers them as invalid.
func TestDoManyAfterItsContext(t *testing.T) {
	e := newGated(t)
	g, b := e.g, e.b
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	before := len(g.log())
	for i, r := range b.DoMany(ctx, []driver.Op{acquireOp("a", "me"), releaseOp("b", "me")}) {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("op %d: %+v, want the context's error", i, r)
		}
	}
	if n := len(g.log()) - before; n != 0 {
		t.Errorf("%d transactions sent after the context ended", n)
	}
	if r := b.DoMany(e.ctx, []driver.Op{{Key: "a", Owner: "me"}}); r[0].Err == nil {
		t.Errorf("an op of no kind: %+v", r[0])
	}
}

// TestDoManyCloseWithWritesInLine: a backend closed while a batch's
// writes wait in line answers them all.
func TestDoManyCloseWithWritesInLine(t *testing.T) {
	e := newGated(t)
	ctx, g, b := e.ctx, e.g, e.b
	release := fillSlots(t, ctx, b, g)
	const n = 8
	var ops []driver.Op
	for i := range n {
		ops = append(ops, acquireOp(fmt.Sprint("k", i), "me"))
	}
	done := make(chan []driver.OpResult, 1)
	go func() { done <- b.DoMany(ctx, ops) }()
	waitInLine(t, b, n)
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	g.open()
	release()
	select {
	case res := <-done:
		if len(res) != n {
			t.Fatalf("%d results for %d ops", len(res), n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a batch in line was never answered after Close")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

var _ driver.Batcher = (*etcd.Backend)(nil)
