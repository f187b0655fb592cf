package service

import (
	"net"
	"net/http"
	"time"
)

// Draining HTTP/1.1 connections. HTTP/2 has GOAWAY: a client learns which
// of its calls an instance that shuts down never ran, and makes them
// again elsewhere. HTTP/1.1 has nothing of the kind: a request that
// crosses the instance's close of an idle connection fails, and its
// client cannot tell that it never ran — "unknown outcome" for a lock
// operation. The Go client makes its Batch calls over HTTP/1.1 when busy
// (remote/transport.go), and closes such a connection itself after 1 s
// idle. So a draining instance answers each HTTP/1.x call (DRAINING) with
// "Connection: close", and before it closes the idle connections waits
// until every connection that served HTTP/1.x is closed by its client, up
// to DefaultHTTP1Grace: long enough for the Go client's idle ones.

// DefaultHTTP1Grace is how long a draining instance waits for its
// HTTP/1.x clients to close their connections: twice the Go client's
// idle time for them.
const DefaultHTTP1Grace = 2 * time.Second

// http1Conns notes the connections that serve HTTP/1.x, and closes each
// after its answer once the instance drains.
func (s *Server) http1Conns(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			if c := connOf(r.Context()); c != nil {
				c.servesHTTP1()
			}
			if s.draining.Load() {
				w.Header().Set("Connection", "close")
			}
		}
		h.ServeHTTP(w, r)
	})
}

// awaitHTTP1 waits until no connection of ln that served HTTP/1.x is
// open, or for grace.
func awaitHTTP1(ln net.Listener, grace time.Duration) {
	tl, ok := ln.(*trackingListener)
	if !ok {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(grace)
	for tl.http1.Load() > 0 {
		select {
		case <-tick.C:
		case <-end:
			return
		}
	}
}
