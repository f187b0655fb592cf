package etcd_test

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// replyLoss decides the fate of each transaction: sent and answered
// (nil), sent but its answer lost (the write applied, the caller told
// Unavailable), or not sent at all (Unavailable).
type replyLoss func(txn *pb.TxnRequest) (send, answer bool)

func (f replyLoss) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	send, answer := f(txn)
	if send {
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil || answer {
			return err
		}
	}
	return status.Error(codes.Unavailable, "connection lost")
}

// comparesValue reports whether txn compares key's value with value.
func comparesValue(txn *pb.TxnRequest, key, value string) bool {
	for _, c := range txn.Compare {
		if c.Target == pb.Compare_VALUE && string(c.Key) == key && string(c.GetValue()) == value {
			return true
		}
	}
	return false
}

// puts reports whether txn (at its top level) writes key = value.
func puts(txn *pb.TxnRequest, key, value string) bool {
	for _, op := range txn.Success {
		if p := op.GetRequestPut(); p != nil && string(p.Key) == key && string(p.Value) == value {
			return true
		}
	}
	return false
}

// TestOrphanBehindAnEarlierHold: a backend's release whose answer was
// lost leaves its write tracked; when the same backend's next attempt on
// the key wrote it, lost the answer too, and could not clean up, that
// attempt's key is still deleted — it does not stay for as long as the
// backend's other locks renew the shared lease.
func TestOrphanBehindAnEarlierHold(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	lk := lockKey("k")
	loss := replyLoss(func(txn *pb.TxnRequest) (bool, bool) {
		switch {
		case comparesValue(txn, lk, "a"): // a's release: applied, answer lost
			return true, false
		case puts(txn, lk, "b"): // b's grant: applied, answer lost
			return true, false
		case comparesValue(txn, lk, "b"): // b's clean-up: not sent
			return false, false
		}
		return true, true
	})
	b := interceptedBackend(t, srv, loss.intercept)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := b.Acquire(ctx, "busy", "busy", shortTTL); !ok || err != nil {
		t.Fatalf("acquire busy = %v, %v", ok, err)
	}
	_, failed := renewing(t, b, "busy", "busy")
	if _, ok, err := b.Acquire(ctx, "k", "a", shortTTL); !ok || err != nil {
		t.Fatalf("acquire = %v, %v", ok, err)
	}
	if _, err := b.Release(ctx, "k", "a"); err == nil {
		t.Fatal("the release's answer was not lost")
	}
	if _, ok, err := b.Acquire(ctx, "k", "b", shortTTL); ok || err == nil {
		t.Fatalf("acquire with its answer lost = %v, %v", ok, err)
	}
	if r, err := raw.Get(ctx, lk); err != nil || len(r.Kvs) == 0 || string(r.Kvs[0].Value) != "b" {
		t.Fatalf("b's write did not land: %v, %v", r, err)
	}
	start := time.Now()
	gone(t, raw, "k", start, 8*shortTTL)
	noFailure(t, "the renewed lock", failed)
}
