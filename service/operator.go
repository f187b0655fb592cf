package service

import "net/http"

// What the operator page (package dashboard) needs of an instance beyond
// its API: who the caller is, and who waits on a key here.

// CallerRole names the role of the bearer token in h ("read", "lock" or
// "admin"), so that the page shows a reader no control it may not use;
// the API refuses such calls anyway. An instance without tokens lets
// everyone do everything: "admin". A missing or unknown token is an
// error that never shows it.
func (s *Server) CallerRole(h http.Header) (string, error) {
	c, err := s.authenticate(h)
	if err != nil {
		return "", err
	}
	if c.tok == nil {
		return roleAdmin.String(), nil
	}
	return c.tok.role.String(), nil
}

// KeyWatchers counts this instance's Watch streams of the one key: a
// turnstile:// client waiting for a held lock watches its key for the
// release, so on a store that keeps no queue these are its waiters
// (prefix watches, the page's own, are not counted).
func (s *Server) KeyWatchers(key string) int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return len(s.hub.keys[key])
}
