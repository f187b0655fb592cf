package remote

import (
	"net"
	"net/http"
	"time"

	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// The Batch calls of a busy client — its hot path — go over HTTP/1.1
// connections of their own, one per call on its way (batch.go has at
// most two, the watchdog's renewals one more); every other call, and the
// Batch calls of a client that makes one now and then, over one HTTP/2
// connection. Go's HTTP/1.1 costs both sides much less CPU per call than
// its HTTP/2: the instance runs the call on the connection's goroutine
// and answers with one write, where HTTP/2 passes the call between four
// goroutines and the client writes the request's headers and its body
// apart.
//
// HTTP/1.1 has no GOAWAY: an instance that closes an idle connection
// cannot tell a request crossing the close that it never ran. So the
// client closes its idle HTTP/1.1 connections itself, batchIdle after
// their last call, before an instance does: a draining instance answers
// every call DRAINING and closes the connection after it, and waits up
// to twice batchIdle for the client to close the idle ones (the
// service's drainHTTP1) before it closes what remains. A batch that
// follows the last one by more than batchIdle goes over HTTP/2, whose
// connection stays, rather than dial again.
//
// A silent instance is found on these connections by TCP keepalive
// while idle, and by TCP_USER_TIMEOUT (Linux) while a call waits, as
// HTTP/2 pings find it on the other.
const (
	// batchIdle is how long an HTTP/1.1 connection stays idle before
	// the client closes it.
	batchIdle = time.Second
	// batchConns is how many idle HTTP/1.1 connections to an instance
	// are kept.
	batchConns = maxInFlight + 1
	// silentAfter is how long a call's data may go unacknowledged before
	// its connection is given up on: about the HTTP/2 pings' bound.
	silentAfter = 15 * time.Second
)

// batchTransport is the HTTP/1.1 transport of the Batch calls, dialling
// as dialer does.
func batchTransport(dialer net.Dialer, cfg Config) *http.Transport {
	dialer.Control = userTimeout(silentAfter)
	var http1 http.Protocols
	http1.SetHTTP1(true)
	tlsCfg := cfg.TLS
	if tlsCfg != nil {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: cfg.DialTimeout,
		Protocols:           &http1,
		MaxIdleConnsPerHost: batchConns,
		IdleConnTimeout:     batchIdle,
	}
}

// batchClient is the client the next Batch call to in goes by: HTTP/1.1
// while the batches follow each other within batchIdle, HTTP/2 else.
func (c *conn) batchClient(in *instance) turnstilev1connect.LocksClient {
	if time.Now().UnixNano()-c.lastBatch.Load() < int64(batchIdle) {
		return in.batches
	}
	return in.locks
}

// batchEnded notes the end of a Batch call.
func (c *conn) batchEnded() { c.lastBatch.Store(time.Now().UnixNano()) }
