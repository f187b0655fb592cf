// Package dashboard is the operator page of "turnstile serve": the locks
// held now, one key's history, live charts of the instance's metrics,
// and force unlock for an admin token.
//
// The page is a small script over the instance's own API, from the same
// origin and nothing else: it reads with the Connect JSON calls a curl
// user makes (Info, Leader, Watch), and three endpoints of this package
// call the same API handler in process with the caller's bearer token —
// the lock list paged on the server, force unlock (which adds CSRF
// checks), and the metrics the charts plot — so a token's role and key
// prefixes bound the page exactly as they bound the API. Its assets are
// embedded: no build step, nothing loaded from elsewhere, and a strict
// Content-Security-Policy (no inline script or style).
package dashboard

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

//go:embed assets
var assets embed.FS

// Options are what the page needs of an instance.
type Options struct {
	// API is the instance's API handler (service.Server.Handler): the
	// page's calls go through it, with the caller's token.
	API http.Handler
	// Role names the role of the bearer token in a request's headers:
	// "read", "lock" or "admin" (service.Server.CallerRole).
	Role func(http.Header) (string, error)
	// Watchers counts the instance's Watch streams of one key: the
	// waiters of a store that keeps no queue (service.Server.KeyWatchers).
	// Nil: none are counted.
	Watchers func(key string) int
	// Gatherer has the instance's metrics, which the charts plot. Nil:
	// no charts.
	Gatherer prometheus.Gatherer
	// Window is how many locks one listing asks the store for, which the
	// page sorts by key and shows a page of at a time (default 1000, at
	// most 10,000: List's limit).
	Window int
}

// ErrOptions marks Options that cannot work.
var ErrOptions = errors.New("dashboard options")

// DefaultWindow is Options.Window's default.
const DefaultWindow = 1000

// maxWindow is List's own limit.
const maxWindow = 10_000

// Page serves the operator page.
type Page struct {
	o   Options
	api *apiClient
	mux *http.ServeMux
}

// New returns the page over o.API.
func New(o Options) (*Page, error) {
	if o.API == nil || o.Role == nil {
		return nil, fmt.Errorf("%w: API and Role are required", ErrOptions)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Window < 1 || o.Window > maxWindow {
		return nil, fmt.Errorf("%w: window %d is not in [1, %d]", ErrOptions, o.Window, maxWindow)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	p := &Page{o: o, api: newAPIClient(o.API)}
	mux := http.NewServeMux()
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", files)
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", noListing(files)))
	mux.HandleFunc("GET /ui/api/session", p.session)
	mux.HandleFunc("GET /ui/api/locks", p.locks)
	mux.HandleFunc("GET /ui/api/lock", p.lock)
	mux.HandleFunc("GET /ui/api/metrics", p.metrics)
	mux.HandleFunc("POST /ui/api/force-release", p.forceRelease)
	mux.HandleFunc("GET /ui/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
	p.mux = mux
	return p, nil
}

// Paths are the patterns to mount the page at beside the API
// (service.ServeOptions.Extra): the root, exactly, and /ui/.
var Paths = []string{"/{$}", "/ui/"}

// Mount adds the page to extra, a path → handler map beside the API.
func (p *Page) Mount(extra map[string]http.Handler) map[string]http.Handler {
	if extra == nil {
		extra = map[string]http.Handler{}
	}
	for _, path := range Paths {
		extra[path] = p
	}
	return extra
}

// ServeHTTP serves the page's files and endpoints, each with the
// security headers.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w.Header())
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	p.mux.ServeHTTP(w, r)
}

// maxBody bounds a request's body: the page sends a key and a kind.
const maxBody = 64 << 10

// csp lets the page load its own script, style and images and call its
// own origin, nothing else: no inline script or style, no frames, no
// form posts.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func secure(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// noListing refuses directories: the page's files only.
func noListing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
