// Package apierr is how the turnstile lock service's errors carry their
// reason, for the server and its Go client alike: a google.rpc.ErrorInfo
// detail of domain Domain whose reason is a name of the .proto's
// ErrorReason, and the same name in the Header response header (a
// stream's trailer), for clients that read no details (curl -i).
package apierr

import (
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Domain is the domain of the service's ErrorInfo details.
const Domain = "turnstile"

// Header is the response header, or trailer, that carries the reason.
const Header = "Turnstile-Reason"

// New returns an error of code whose reason is reason ("" for none).
func New(code connect.Code, reason string, err error) *connect.Error {
	out := connect.NewError(code, err)
	if reason != "" {
		if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: Domain}); derr == nil {
			out.AddDetail(d)
		}
		out.Meta().Set(Header, reason)
	}
	return out
}

// Reason returns the reason of an error from the service, or "" if it
// has none (an error of the transport, say).
func Reason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetReason()
		}
	}
	return ce.Meta().Get(Header)
}

// FromBatch is the error an op of a Batch would have ended its own call
// with.
func FromBatch(e *v1.BatchError) *connect.Error {
	var code connect.Code
	if err := code.UnmarshalText([]byte(e.GetCode())); err != nil {
		code = connect.CodeUnknown
	}
	return New(code, e.GetReason(), errors.New(e.GetMessage()))
}
