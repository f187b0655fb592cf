package zookeeper

import (
	"fmt"
	"net/url"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// urlForm is the form of the URLs that turnstile.Open takes:
//
//	zookeeper://host[:port][,host[:port]...][/chroot][?session_timeout=30s]
//
// The port defaults to 2181. Lock nodes live under /chroot/turnstile/locks
// (without a chroot, /turnstile/locks). IPv6 servers are bracketed
// ([::1]:2181), alone or in a list.
var urlForm = storeurl.Form{Schemes: []string{"zookeeper"}, Shape: "host:port", Users: storeurl.UserRefused, Invalid: turnstile.ErrInvalidURL}

func init() {
	turnstile.Register("zookeeper", storeurl.Opener(parseURL, Dial))
}

// parseURL reads u, or says what is wrong with it without showing any of
// its secrets (the other results then mean nothing).
func parseURL(u *url.URL) (servers []string, opts []Option, err error) {
	err = urlForm.Read(u, func(r *storeurl.URL) (err error) {
		if servers, err = r.Hosts("2181", ""); err != nil {
			return err
		}
		chroot, err := cleanRoot(u.Path)
		if err != nil {
			return fmt.Errorf("chroot: %v", err)
		}
		opts = []Option{WithRoot(chroot + DefaultRoot)}
		return r.Params(map[string]storeurl.Param{
			"session_timeout": storeurl.Append(&opts, storeurl.DurationIn(time.Millisecond, 0, "30s"), WithSessionTimeout),
		})
	})
	return servers, opts, err
}
