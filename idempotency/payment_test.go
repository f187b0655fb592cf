package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/idempotency"
)

// paymentService charges a card once per request id, however often the
// client retries.
type paymentService struct {
	store    idempotency.Store
	charges  atomic.Int64  // what the card network saw
	slow     chan struct{} // the card network answers when this is closed
	charging chan struct{} // closed when the first charge reaches the card network
	once     sync.Once
}

func newPaymentService(s idempotency.Store) *paymentService {
	return &paymentService{store: s, slow: make(chan struct{}), charging: make(chan struct{})}
}

// response is what the client receives for one HTTP request.
type response struct {
	receipt  string
	replayed bool
	err      error
}

// handle serves one request to the end, in the server's own context: a
// client that stops waiting does not stop the charge.
func (p *paymentService) handle(requestID string) <-chan response {
	resp := make(chan response, 1)
	go func() {
		r, rep, err := p.store.Do(context.Background(), "payment:"+requestID, func(ctx context.Context) ([]byte, error) {
			p.once.Do(func() { close(p.charging) })
			select {
			case <-p.slow:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			n := p.charges.Add(1)
			return fmt.Appendf(nil, "receipt-%d", n), nil
		})
		resp <- response{string(r), rep, err}
	}()
	return resp
}

// clientTimeout is how long the client waits for the first attempt's
// answer before it gives up and retries; retries wait for their answer up
// to retryTimeout.
const (
	clientTimeout = 50 * time.Millisecond
	retryTimeout  = 10 * time.Second
)

// send is the client's HTTP call: the answer, or false on timeout.
func send(p *paymentService, requestID string, timeout time.Duration) (response, bool, <-chan response) {
	resp := p.handle(requestID)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-resp:
		return r, true, resp
	case <-t.C:
		return response{}, false, resp
	}
}

func TestDoublePaymentFailFast(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		p := newPaymentService(k.open(t))
		id := key(t, "req-7f3a")
		// The first attempt times out at the client; the charge goes on.
		_, answered, first := send(p, id, clientTimeout)
		if answered {
			t.Fatal("the slow charge answered before the client timed out")
		}
		<-p.charging
		// The retry arrives while the charge still runs.
		r, answered, _ := send(p, id, retryTimeout)
		if !answered || !errors.Is(r.err, idempotency.ErrInProgress) {
			t.Fatalf("retry during the charge: answered=%v %+v, want ErrInProgress", answered, r)
		}
		close(p.slow)
		if r := <-first; r.err != nil || r.receipt != "receipt-1" {
			t.Fatalf("first attempt ended with %+v", r)
		}
		// The next retry gets the first charge's receipt.
		r, answered, _ = send(p, id, retryTimeout)
		if !answered || r.err != nil || !r.replayed || r.receipt != "receipt-1" {
			t.Errorf("retry after the charge: answered=%v %+v, want replayed receipt-1", answered, r)
		}
		if n := p.charges.Load(); n != 1 {
			t.Errorf("card charged %d times, want once", n)
		}
	})
}

func TestDoublePaymentWait(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		p := newPaymentService(k.open(t, idempotency.WithWait(10*time.Second)))
		id := key(t, "req-7f3a")
		_, answered, first := send(p, id, clientTimeout)
		if answered {
			t.Fatal("the slow charge answered before the client timed out")
		}
		<-p.charging
		// The retry reaches the server while the first attempt charges:
		// two requests at the charge step together. The retry waits.
		retry := p.handle(id)
		time.AfterFunc(2*clientTimeout, func() { close(p.slow) })
		r := <-retry
		if r.err != nil || !r.replayed || r.receipt != "receipt-1" {
			t.Errorf("retry: %+v, want replayed receipt-1", r)
		}
		if r := <-first; r.err != nil || r.replayed || r.receipt != "receipt-1" {
			t.Errorf("first attempt: %+v, want receipt-1", r)
		}
		if n := p.charges.Load(); n != 1 {
			t.Errorf("card charged %d times, want once", n)
		}
	})
}
