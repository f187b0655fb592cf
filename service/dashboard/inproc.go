package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"connectrpc.com/connect"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// apiClient calls the instance's API handler in process: the calls pass
// the same authentication, roles, prefixes, rate limits and metrics as a
// client's over the network.
type apiClient struct {
	locks turnstilev1connect.LocksClient
}

// inproc is the base URL of the in-process calls; no connection is made.
const inproc = "http://in-process"

func newAPIClient(h http.Handler) *apiClient {
	return &apiClient{locks: turnstilev1connect.NewLocksClient(handlerDoer{h}, inproc)}
}

// handlerDoer is a connect.HTTPClient that serves each request with a
// handler.
type handlerDoer struct{ h http.Handler }

func (d handlerDoer) Do(r *http.Request) (*http.Response, error) {
	w := &recorder{header: http.Header{}, status: http.StatusOK}
	d.h.ServeHTTP(w, r)
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()),
		Request: r,
	}, nil
}

// recorder keeps a unary call's response.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}
func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// request makes a call's request, with the caller's bearer token.
func request[T any](r *http.Request, m *T) *connect.Request[T] {
	req := connect.NewRequest(m)
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header().Set("Authorization", a)
	}
	return req
}

func (c *apiClient) list(ctx context.Context, r *http.Request, m *v1.ListRequest) (*v1.ListResponse, error) {
	resp, err := c.locks.List(ctx, request(r, m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (c *apiClient) status(ctx context.Context, r *http.Request, m *v1.StatusRequest) (*v1.StatusResponse, error) {
	resp, err := c.locks.Status(ctx, request(r, m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (c *apiClient) forceRelease(ctx context.Context, r *http.Request, m *v1.ForceReleaseRequest) (*v1.ForceReleaseResponse, error) {
	resp, err := c.locks.ForceRelease(ctx, request(r, m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// apiError answers with an API call's error: its status and message (the
// API's messages never hold a token).
func apiError(w http.ResponseWriter, err error) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		writeError(w, http.StatusInternalServerError, "internal", "the call failed")
		return
	}
	writeError(w, httpStatus(ce.Code()), ce.Code().String(), ce.Message())
}

// httpStatus is the HTTP status Connect gives code.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAborted, connect.CodeAlreadyExists:
		return http.StatusConflict
	case connect.CodeFailedPrecondition:
		return http.StatusPreconditionFailed
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
