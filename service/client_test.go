package service_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// apiClients are the generated clients of one instance.
type apiClients struct {
	locks     turnstilev1connect.LocksClient
	elections turnstilev1connect.ElectionsClient
	http      *http.Client
}

// h2c returns an HTTP/2 client without TLS whose connections are closed
// when the test ends.
func h2c(t testing.TB) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// clientsOf returns clients of the instance at addr, over HTTP/2, with
// opts (a token, the gRPC protocol).
func clientsOf(t testing.TB, addr string, opts ...connect.ClientOption) apiClients {
	hc := h2c(t)
	return apiClients{
		locks:     turnstilev1connect.NewLocksClient(hc, "http://"+addr, opts...),
		elections: turnstilev1connect.NewElectionsClient(hc, "http://"+addr, opts...),
		http:      hc,
	}
}

// withToken sends a bearer token with every call.
func withToken(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}), streamToken(token))
}

type streamToken string

func (s streamToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (s streamToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		c := next(ctx, spec)
		c.RequestHeader().Set("Authorization", "Bearer "+string(s))
		return c
	}
}
func (s streamToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
