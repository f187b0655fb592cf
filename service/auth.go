package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/service/apierr"
)

// caller is who makes a call: a token of the tokens file, or anyone when
// the instance takes no tokens.
type caller struct {
	tok *Token // nil: no tokens file, every call allowed
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// callerName names the caller in logs and metrics: the token's name, or
// "-".
func callerName(ctx context.Context) string {
	if c := callerOf(ctx); c.tok != nil {
		return c.tok.Name
	}
	return "-"
}

// allowRole refuses a caller whose role is below r.
func allowRole(ctx context.Context, r role) error {
	c := callerOf(ctx)
	if c.tok == nil {
		return nil
	}
	if c.tok.role < r {
		return fmt.Errorf("%w: token %q has role %s; the call needs %s", errRole, c.tok.Name, c.tok.role, r)
	}
	return nil
}

// allow refuses a caller whose role is below r or who may not use key.
func allow(ctx context.Context, r role, key string) error {
	if err := allowRole(ctx, r); err != nil {
		return err
	}
	c := callerOf(ctx)
	if c.tok == nil {
		return nil
	}
	for _, p := range c.tok.Prefixes {
		if strings.HasPrefix(key, p) {
			return nil
		}
	}
	return fmt.Errorf("%w: token %q may use keys under %s", errKeyNotAllowed, c.tok.Name, quoteAll(c.tok.Prefixes))
}

// allowPrefix checks a prefix to list or watch under, and returns the
// prefix to use: the token's own when it has exactly one and the caller
// named none.
func allowPrefix(ctx context.Context, r role, prefix string) (string, error) {
	if err := allowRole(ctx, r); err != nil {
		return "", err
	}
	c := callerOf(ctx)
	if c.tok == nil {
		return prefix, nil
	}
	if prefix == "" && len(c.tok.Prefixes) == 1 {
		return c.tok.Prefixes[0], nil
	}
	for _, p := range c.tok.Prefixes {
		if strings.HasPrefix(prefix, p) {
			return prefix, nil
		}
	}
	return "", fmt.Errorf("%w: token %q may look under %s only", errKeyNotAllowed, c.tok.Name, quoteAll(c.tok.Prefixes))
}

func quoteAll(prefixes []string) string {
	q := make([]string, len(prefixes))
	for i, p := range prefixes {
		if p == "" {
			q[i] = "every key"
		} else {
			q[i] = fmt.Sprintf("%q", p)
		}
	}
	return strings.Join(q, ", ")
}

// authenticate finds the caller of a call from its Authorization header.
// It never logs or returns the token.
func (s *Server) authenticate(h http.Header) (caller, error) {
	ts := s.tokens.Load()
	if ts == nil {
		return caller{}, nil
	}
	v := h.Get("Authorization")
	scheme, bearer, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return caller{}, errUnauthenticated
	}
	tok, ok := ts.lookup(strings.TrimSpace(bearer))
	if !ok {
		return caller{}, errUnauthenticated
	}
	return caller{tok: tok}, nil
}

// admit applies the caller's rate limit to one call.
func admit(ctx context.Context, c caller) error {
	if c.tok == nil || c.tok.limiter == nil {
		return nil
	}
	ok, retry, err := c.tok.limiter.Admit(ctx, c.tok.Name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %g calls a second; retry after %v", errRateLimited, c.tok.Rate, retry.Round(time.Millisecond))
	}
	return nil
}

// admitN applies the caller's rate limit to n more calls (the ops of a
// batch beyond the one the call counted as).
func admitN(ctx context.Context, c caller, n int) error {
	if n <= 0 || c.tok == nil || c.tok.limiter == nil {
		return nil
	}
	got, retry, err := c.tok.limiter.AdmitN(ctx, c.tok.Name, n)
	if err != nil {
		return err
	}
	if got < n {
		return fmt.Errorf("%w: %g calls a second; a batch of %d ops is over it; retry after %v", errRateLimited, c.tok.Rate, n+1, retry.Round(time.Millisecond))
	}
	return nil
}

// gate is the interceptor every call passes: who calls, within its
// rate, within the connection's stream limit, counted in the metrics.
type gate struct{ s *Server }

func (s *Server) interceptor() connect.Interceptor { return gate{s} }

// enter admits a call and returns its context and what to call when it
// ends.
func (g gate) enter(ctx context.Context, procedure string, h http.Header, stream bool) (context.Context, func(error), error) {
	start := time.Now()
	c, err := g.s.authenticate(h)
	if err == nil {
		ctx = context.WithValue(ctx, callerKey{}, c)
		err = admit(ctx, c)
	}
	leave := func() {}
	if err == nil && stream {
		leave, err = enterStream(ctx, g.s.cfg.MaxStreamsPerConn)
	}
	tenant := callerName(ctx)
	if err != nil {
		g.s.metrics.call(procedure, tenant, err, time.Since(start))
		return nil, nil, err
	}
	return ctx, func(err error) {
		leave()
		g.s.metrics.call(procedure, tenant, err, time.Since(start))
	}, nil
}

func (g gate) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, done, err := g.enter(ctx, req.Spec().Procedure, req.Header(), false)
		if err != nil {
			return nil, toConnect(err)
		}
		resp, err := next(ctx, req)
		done(err)
		return resp, err
	}
}

func (g gate) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g gate) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, done, err := g.enter(ctx, conn.Spec().Procedure, conn.RequestHeader(), true)
		if err != nil {
			err = toConnect(err)
			copyReason(err, conn)
			return err
		}
		err = next(ctx, conn)
		copyReason(err, conn)
		done(err)
		return err
	}
}

// copyReason puts an error's reason in a stream's trailer too, where
// a client of a stream finds it.
func copyReason(err error, conn connect.StreamingHandlerConn) {
	if ce, ok := err.(*connect.Error); ok {
		if r := ce.Meta().Get(apierr.Header); r != "" {
			conn.ResponseTrailer().Set(apierr.Header, r)
		}
	}
}
