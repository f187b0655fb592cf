package dashboard

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// CSRFHeader must come with every mutating call of the page. A form of
// another site cannot send a header, and a script of another site can
// send one only after a CORS preflight, which the service never
// approves; the Origin and Sec-Fetch-Site checks refuse the rest.
const CSRFHeader = "X-Turnstile-Csrf"

// errCrossSite: a mutating call that did not come from the page.
var errCrossSite = errors.New("refused: the call did not come from this service's page (cross-site request)")

// sameSite checks that a mutating call comes from a script of the page.
func sameSite(r *http.Request) error {
	if r.Header.Get(CSRFHeader) != "1" {
		return errCrossSite
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return errCrossSite
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errCrossSite
		}
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return errCrossSite
	}
	return nil
}

// forceRelease removes a lock whoever holds it, through the API's
// ForceRelease (admin role: the API refuses any other token), which
// raises the key's fence first.
func (p *Page) forceRelease(w http.ResponseWriter, r *http.Request) {
	if err := sameSite(r); err != nil {
		writeError(w, http.StatusForbidden, "permission_denied", err.Error())
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_argument", "the body is too long")
		return
	}
	f, err := parseForce(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	resp, err := p.api.forceRelease(r.Context(), r, &v1.ForceReleaseRequest{Key: f.Key, Kind: f.Kind, Permits: f.Permits})
	if err != nil {
		apiError(w, err)
		return
	}
	st := resp.Removed
	if st == nil {
		st = &v1.LockState{Key: f.Key}
	}
	writeJSON(w, http.StatusOK, map[string]any{"removed": p.rowOf(st, f.Kind), "fence_floor": u64(st.GetToken())})
}
