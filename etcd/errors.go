package etcd

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
)

// dialErr is err of connecting with cfg, saying what went wrong in
// terms of the URL: a refused login, or a hint at TLS when the members
// hang up on the client. No message shows the password.
func dialErr(cfg clientv3.Config, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed) || strings.Contains(msg, rpctypes.ErrAuthFailed.Error()):
		return fmt.Errorf("etcd: log in as user %q: %w", cfg.Username, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied) || strings.Contains(msg, rpctypes.ErrPermissionDenied.Error()):
		return permission(err, "log in as user "+fmt.Sprintf("%q", cfg.Username))
	}
	hungUp := strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "server preface")
	eps := strings.Join(cfg.Endpoints, ",")
	switch {
	case cfg.TLS == nil && hungUp:
		return fmt.Errorf("etcd: connect to %s: %w (is etcd expecting TLS? add ca_file=… or tls=on to the URL)", eps, err)
	case cfg.TLS != nil && hungUp && len(cfg.TLS.Certificates) == 0:
		return fmt.Errorf("etcd: connect to %s over TLS: %w (does etcd want a client certificate? add cert_file=… and key_file=… to the URL; or does it serve plain text on this port? then leave the TLS parameters out)", eps, err)
	case cfg.TLS != nil && hungUp:
		return fmt.Errorf("etcd: connect to %s over TLS: %w (does etcd serve plain text on this port? then leave the TLS parameters out; or does it refuse the client certificate?)", eps, err)
	case cfg.TLS == nil && strings.Contains(msg, "deadline exceeded") && !strings.Contains(msg, "connection error"):
		return fmt.Errorf("etcd: connect to %s: %w (no answer over plain HTTP/2; if etcd expects TLS, add ca_file=… or tls=on to the URL)", eps, err)
	case cfg.TLS != nil:
		return fmt.Errorf("etcd: connect to %s over TLS: %w", eps, err)
	}
	return fmt.Errorf("etcd: connect to %s: %w", eps, err)
}

// permission wraps err in turnstile.ErrPermission when etcd refused the
// request to the user the client logged in as; what names the request.
// Other errors pass unchanged.
func permission(err error, what string) error {
	if err == nil || errors.Is(err, turnstile.ErrPermission) {
		return err
	}
	if !errors.Is(err, rpctypes.ErrPermissionDenied) && !strings.Contains(err.Error(), rpctypes.ErrPermissionDenied.Error()) {
		return err
	}
	return fmt.Errorf("%w: etcd: the user may not %s (give its role readwrite on the keys under the prefix): %w", turnstile.ErrPermission, what, err)
}
