package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/service/apierr"
	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// Failing over between instances. Every instance serves every call, so a
// call goes to the instance the last call went to, and on to the next
// when that one cannot take it:
//
//   - it cannot be reached (the connection is refused, or dialling it
//     times out): the call never left, and is made on the next instance
//     at once;
//   - it drains (UNAVAILABLE, reason DRAINING): it did nothing, and the
//     call is made on the next instance at once;
//   - the connection broke during the call, or a lock call had no answer
//     within its attempt's time (attempt): the outcome is unknown, and
//     the call returns the error, as a store's would (the Client
//     retries acquisitions and renewals on its own); the instance is
//     passed over for a while.
//
// An instance passed over is tried again after skipFor, or when every
// other one is passed over too.

// skipFor is how long an instance that failed is passed over.
const skipFor = 2 * time.Second

// instance is one instance of the service.
type instance struct {
	addr      string
	locks     turnstilev1connect.LocksClient
	elections turnstilev1connect.ElectionsClient
	// batches makes the Batch calls of a busy client, over HTTP/1.1
	// (transport.go).
	batches   turnstilev1connect.LocksClient
	skipUntil atomic.Int64 // unix nanoseconds
}

// conn is the instances of one URL, shared by every view of its backend.
type conn struct {
	instances []*instance
	current   atomic.Int64
	http      *http.Client
	batchHTTP *http.Client
	lastBatch atomic.Int64 // unix nanoseconds: when the last Batch call ended
	name      string       // "h1:7070,h2:7070"
	ops       *batcher
	callFor   time.Duration // Config.CallTimeout
	closeOnce sync.Once
}

func newConn(cfg Config) *conn {
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 4}}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     cfg.TLS,
		TLSHandshakeTimeout: cfg.DialTimeout,
		ForceAttemptHTTP2:   true,
		// A dead instance is found by HTTP/2 pings on an idle connection.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 5 * time.Second},
	}
	var protocols http.Protocols
	scheme := "https://"
	if cfg.TLS == nil {
		protocols.SetUnencryptedHTTP2(true)
		scheme = "http://"
	} else {
		protocols.SetHTTP2(true)
	}
	tr.Protocols = &protocols
	c := &conn{
		http:      &http.Client{Transport: tr},
		batchHTTP: &http.Client{Transport: batchTransport(*dialer, cfg)},
		name:      strings.Join(cfg.Hosts, ","),
		callFor:   cfg.CallTimeout,
	}
	if c.callFor <= 0 {
		c.callFor = DefaultCallTimeout
	}
	opts := []connect.ClientOption{}
	if cfg.Token != "" {
		opts = append(opts, connect.WithInterceptors(bearer(cfg.Token)))
	}
	for _, h := range cfg.Hosts {
		c.instances = append(c.instances, &instance{
			addr:      h,
			locks:     turnstilev1connect.NewLocksClient(c.http, scheme+h, opts...),
			elections: turnstilev1connect.NewElectionsClient(c.http, scheme+h, opts...),
			batches:   turnstilev1connect.NewLocksClient(c.batchHTTP, scheme+h, opts...),
		})
	}
	c.ops = newBatcher(c)
	return c
}

// pick returns the instance a call goes to first, and the order of the
// others after it.
func (c *conn) order() []*instance {
	n := len(c.instances)
	start := int(c.current.Load() % int64(n))
	now := time.Now().UnixNano()
	out := make([]*instance, 0, n)
	var skipped []*instance
	for i := range n {
		in := c.instances[(start+i)%n]
		if in.skipUntil.Load() > now {
			skipped = append(skipped, in)
			continue
		}
		out = append(out, in)
	}
	return append(out, skipped...)
}

// skip passes over in for a while and makes the next instance current.
func (c *conn) skip(in *instance) {
	in.skipUntil.Store(time.Now().Add(skipFor).UnixNano())
	for i, x := range c.instances {
		if x == in {
			c.current.CompareAndSwap(int64(i), int64(i+1)%int64(len(c.instances)))
		}
	}
}

// use makes in the instance calls go to first.
func (c *conn) use(in *instance) {
	for i, x := range c.instances {
		if x == in {
			c.current.Store(int64(i))
		}
	}
}

// call makes f's call on the instances in turn, as the top of this file
// says.
func call[T any](ctx context.Context, c *conn, f func(in *instance) (T, error)) (T, error) {
	var zero T
	var errs []error
	for _, in := range c.order() {
		v, err := f(in)
		if err == nil {
			c.use(in)
			return v, nil
		}
		switch {
		case notSent(err):
			c.skip(in)
			errs = append(errs, err)
			if ctx.Err() != nil {
				return zero, errors.Join(errs...)
			}
			continue
		case brokenConn(err):
			c.skip(in)
		}
		return zero, err
	}
	return zero, errors.Join(errs...)
}

// minAttempt is the shortest attempt attempt gives an instance while the
// call's deadline allows it.
const minAttempt = 50 * time.Millisecond

// attempt bounds one attempt of a lock call on one instance: at most
// callFor, and at most half of what is left of ctx's deadline (but not
// under minAttempt), so that the next instance has the rest.
func (c *conn) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.callFor
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)/2, minAttempt))
	}
	return context.WithTimeout(ctx, d)
}

// noAnswer turns the error of an attempt that ran out of its own time,
// while the call's ctx had time left, into a broken connection's
// (brokenConn): the instance is passed over, and the outcome is unknown.
func noAnswer(ctx, actx context.Context, addr string, err error) error {
	awaitOwnDeadline(actx, err)
	if err == nil || ctx.Err() != nil || !errors.Is(actx.Err(), context.DeadlineExceeded) {
		return err
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("no answer from %s in time: %w", addr, err))
}

// notSent reports whether err says the call never reached an instance,
// or reached one that did nothing with it (draining).
func notSent(err error) bool {
	if apierr.Reason(err) == "DRAINING" {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// brokenConn reports whether err is the transport's, not an instance's
// answer.
func brokenConn(err error) bool {
	code := connect.CodeOf(err)
	return (code == connect.CodeUnavailable || code == connect.CodeUnknown || code == connect.CodeInternal) && apierr.Reason(err) == ""
}

// bearer adds the token to every call.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		sc := next(ctx, spec)
		sc.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return sc
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.ops.close()
		c.http.CloseIdleConnections()
		c.batchHTTP.CloseIdleConnections()
	})
}
