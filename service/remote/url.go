package remote

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// DefaultPort is the port of a host the URL names without one: the port
// "turnstile serve" listens on by default.
const DefaultPort = "7070"

// DefaultDialTimeout bounds connecting to an instance when a URL sets no
// dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// DefaultCallTimeout bounds one attempt of a call on one instance when a
// URL sets no call_timeout.
const DefaultCallTimeout = 2 * time.Second

// urlForm is the form of the URLs turnstile.Open takes:
//
//	turnstile://[name:secret@]host[:port][,host[:port]...][?dial_timeout=5s&call_timeout=2s]
//	turnstiles://[name:secret@]host[:port][,...][?ca_file=ca.pem&cert_file=c.pem&key_file=k.pem&server_name=locks.example.com]
//
// The hosts are instances of one service, over one store: every call
// goes to one of them, and to the next when one cannot be reached or is
// draining. The port defaults to 7070. turnstile:// speaks HTTP/2
// without TLS; turnstiles:// speaks it over TLS, verifying the
// instance's certificate (ca_file: the authorities that sign it, default
// the system's), with a client certificate if cert_file and key_file name
// one. The user information is the bearer token of the instance's tokens
// file: name:secret for the token NAME.SECRET; password_file keeps the
// secret out of the URL. call_timeout bounds how long a lock call
// (acquire, extend, release, in their batches) waits for one instance's
// answer — and at most half of what is left of the call's own deadline,
// so that a second instance has the other half: an instance that does
// not answer in time (cut off by the network, or its store) is passed
// over like one whose connection broke.
var urlForm = storeurl.Form{
	Schemes: []string{"turnstile", "turnstiles"},
	Shape:   "[name:secret@]host:port[,host:port...]",
	Users:   storeurl.UserOptional,
	Invalid: turnstile.ErrInvalidURL,
}

// Config is what a turnstile:// URL says.
type Config struct {
	// Hosts are the instances, host:port.
	Hosts []string
	// TLS is nil for turnstile://.
	TLS *tls.Config
	// Token is the bearer token NAME.SECRET, or "".
	Token       string
	DialTimeout time.Duration
	// CallTimeout bounds one attempt of a lock call on one instance.
	CallTimeout time.Duration
}

// ParseURL reads a turnstile:// or turnstiles:// URL. Its errors match
// turnstile.ErrInvalidURL and show none of the URL's secrets.
func ParseURL(u *url.URL) (Config, error) {
	var cfg Config
	err := urlForm.Read(u, func(r *storeurl.URL) error {
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("unexpected path %q: want %s://%s", u.Path, r.Scheme, urlForm.Shape)
		}
		hosts, err := r.Hosts(DefaultPort, "")
		if err != nil {
			return err
		}
		cfg.Hosts = hosts
		switch {
		case r.Username == "" && r.Password != "":
			return errors.New("a secret without a token name: want name:secret@")
		case r.Username != "" && r.Password == "":
			return fmt.Errorf("token name %q without its secret: give it in the URL or in %s", r.Username, storeurl.PasswordFileParam)
		case r.Username != "":
			cfg.Token = r.Username + "." + r.Password
		}
		cfg.DialTimeout, cfg.CallTimeout = DefaultDialTimeout, DefaultCallTimeout
		var tl storeurl.TLS
		if err := r.Params(tl.Params(map[string]storeurl.Param{
			"dial_timeout": storeurl.Store(&cfg.DialTimeout, storeurl.PositiveDuration),
			"call_timeout": storeurl.Store(&cfg.CallTimeout, storeurl.PositiveDuration),
		})); err != nil {
			return err
		}
		if r.Scheme == "turnstile" {
			return tl.RefuseWithout("turnstiles://")
		}
		cfg.TLS, err = tl.Config()
		return err
	})
	return cfg, err
}
