package dashboard_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// operatorSetup is a "turnstile serve" process over a real redis-server,
// with an admin and a read-only token, and a browser logged in as the
// admin on its page.
type operatorSetup struct {
	addr          string
	admin, reader token
	b             *browser
}

func setup(t *testing.T) *operatorSetup {
	t.Helper()
	b := newBrowser(t)
	srv := testserver.StartRedis(t)
	s := &operatorSetup{b: b, admin: makeToken(t, "ops", "admin", "*"), reader: makeToken(t, "viewer", "read", "*")}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(s.admin.line+"\n"+s.reader.line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.addr, _ = startServe(t, "--backend", srv.URL(), "--tokens", tokens)
	s.login(t, s.admin)
	return s
}

// url is the turnstile:// store of the service for a token.
func (s *operatorSetup) url(k token) string {
	return "turnstile://" + k.name + ":" + k.secret + "@" + s.addr
}

// login opens the page and logs in with k on its form.
func (s *operatorSetup) login(t *testing.T, k token) {
	t.Helper()
	s.b.run(t, "open the page and log in",
		chromedp.Navigate("http://"+s.addr+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), k.bearer()),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#list-view")),
	)
	waitFor(t, 30*time.Second, "the role shown", func() error {
		if got := s.b.text(t, "#who"); !strings.Contains(got, "role: ") {
			return fmt.Errorf("%q: %w", got, errNotYet)
		}
		return nil
	})
}

// holdKey runs "turnstile run --key key" holding the lock until it is
// stopped, and returns it with the token the command was given.
func (s *operatorSetup) holdKey(t *testing.T, key string) (*process, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	p := start(t, "run", "--backend", s.url(s.admin), "--key", key, "--ttl", "60s", "--",
		"sh", "-c", `echo "$TURNSTILE_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 600`, file)
	var tok string
	waitFor(t, 60*time.Second, "turnstile run to hold "+key, func() error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		tok = strings.TrimSpace(string(data))
		return nil
	})
	return p, tok
}

// row is the lock list's row of key, as the page shows it.
func (s *operatorSetup) row(t *testing.T, key, cell string) string {
	t.Helper()
	return s.b.text(t, fmt.Sprintf(`#locks tr[data-key=%q] td.%s`, key, cell))
}

// TestBrowserOperatorPage drives the page of a real "turnstile serve" in
// headless Chromium: a held lock appears with its token, its TTL counts
// down, waiters show, the key's page shows its history, force unlock
// ends the holder's "turnstile run" with status 79, a read-only token
// sees no unlock control and is refused anyway, a cross-site request is
// refused, and the console stays clean.
func TestBrowserOperatorPage(t *testing.T) {
	s := setup(t)
	// The processes the subtests start live as long as the whole test.
	top := t
	b := s.b
	const key = "shop:checkout"

	// Unrelated locks, so that the list has more than one row.
	for _, k := range []string{"shop:inventory:42", "billing:invoice:7", "reports:nightly"} {
		s.holdKey(t, k)
	}

	var holder *process
	var tok string
	t.Run("HeldLockAppearsWithItsToken", func(t *testing.T) {
		var held time.Time
		holder, tok = s.holdKey(top, key)
		held = time.Now()
		waitFor(t, 30*time.Second, "the lock's row with its token", func() error {
			if got := s.row(t, key, "token"); got != tok {
				return fmt.Errorf("token cell %q, want %q: %w", got, tok, errNotYet)
			}
			return nil
		})
		// The page refreshes on the instance's Watch event of the grant;
		// how long that took is logged, not asserted (a loaded machine
		// may deschedule anything).
		t.Logf("the lock appeared %v after turnstile run had it", time.Since(held).Round(time.Millisecond))
		if got := s.row(t, key, "owner"); !strings.Contains(got, "/") {
			t.Errorf("holder cell %q: want the owner id", got)
		}
	})

	t.Run("TTLCountsDown", func(t *testing.T) {
		first := ttlSeconds(t, s.row(t, key, "ttl"))
		if first <= 0 || first > 60 {
			t.Fatalf("TTL shown %v s: want within the 60 s TTL", first)
		}
		// A renewal (every 20 s) may raise it between two looks: look
		// until it went down.
		waitFor(t, 30*time.Second, "the TTL to count down", func() error {
			if now := ttlSeconds(t, s.row(t, key, "ttl")); now >= first {
				first = max(first, now)
				return fmt.Errorf("TTL %v s: %w", now, errNotYet)
			}
			return nil
		})
	})

	var waiters []*process
	t.Run("TwoWaitersAppear", func(t *testing.T) {
		for range 2 {
			waiters = append(waiters, start(top, "run", "--backend", s.url(s.admin), "--key", key, "--", "true"))
		}
		waitFor(t, 60*time.Second, "two waiters", func() error {
			if got := s.row(t, key, "waiters"); got != "2" {
				return fmt.Errorf("waiters cell %q: %w", got, errNotYet)
			}
			return nil
		})
		// Charts need two samples of the metrics, 2 s apart.
		waitFor(t, 30*time.Second, "the charts' first points", func() error {
			if got := b.text(t, "#chart-holds figcaption"); !strings.Contains(got, "leases") {
				return fmt.Errorf("%q: %w", got, errNotYet)
			}
			return nil
		})
		b.screenshot(t, "dashboard")
		for _, w := range waiters {
			w.stop(t)
		}
	})

	t.Run("KeyPageShowsGrantReleaseGrant", func(t *testing.T) {
		const hkey = "shop:history"
		b.run(t, "open the key's page", chromedp.Navigate("http://"+s.addr+"/#/key/"+hkey+"?kind=lock"),
			chromedp.WaitVisible(chromedp.CSS("#key-view")))
		// The page's Watch is in place when the page has loaded the key's
		// state once; give it a moment more by waiting for the summary.
		waitFor(t, 30*time.Second, "the key's state", func() error {
			if got := b.text(t, "#key-summary"); got == "" {
				return errNotYet
			}
			return nil
		})
		for range 2 {
			p := start(t, "run", "--backend", s.url(s.admin), "--key", hkey, "--", "true")
			if code := p.exitCode(t, 60*time.Second); code != 0 {
				t.Fatalf("turnstile run exited %d\n%s", code, p.output())
			}
		}
		var events []struct{ Type, Token string }
		waitFor(t, 30*time.Second, "grant, release, grant in the history", func() error {
			events = eval[[]struct{ Type, Token string }](t, b, `[...document.querySelectorAll('#history tbody tr')].map(r => ({Type: r.dataset.type, Token: r.dataset.token}))`)
			if len(events) < 3 {
				return fmt.Errorf("history %v: %w", events, errNotYet)
			}
			return nil
		})
		if events[0].Type != "acquired" || events[1].Type != "released" || events[2].Type != "acquired" {
			t.Fatalf("history %v: want acquired, released, acquired", events)
		}
		t1, _ := strconv.ParseUint(events[0].Token, 10, 64)
		t2, _ := strconv.ParseUint(events[2].Token, 10, 64)
		if events[1].Token != events[0].Token || t1 == 0 || t2 <= t1 {
			t.Fatalf("history %v: want the release of the first grant's token, and a greater token for the second grant", events)
		}
		b.screenshot(t, "key-history")
	})

	t.Run("ForceUnlockEndsTheHolder", func(t *testing.T) {
		b.run(t, "open the held key's page and force unlock it",
			chromedp.Navigate("http://"+s.addr+"/#/key/"+key+"?kind=lock"),
			chromedp.WaitVisible(chromedp.CSS("#force-confirm")))
		if !b.visible(t, "#force-button") {
			t.Fatal("an admin sees no force unlock button")
		}
		if !eval[bool](t, b, `document.getElementById('force-button').disabled`) {
			t.Fatal("force unlock is enabled before the key is typed")
		}
		b.run(t, "confirm and unlock",
			chromedp.SendKeys(chromedp.CSS("#force-confirm"), key),
			chromedp.Click(chromedp.CSS("#force-button")))
		if code := holder.exitCode(t, 60*time.Second); code != 79 {
			t.Fatalf("the holder's turnstile run exited %d, want 79 (lease lost)\n%s", code, holder.output())
		}
		waitFor(t, 30*time.Second, "the lock gone from its page", func() error {
			if got := b.text(t, "#key-summary"); got != "Not held now." {
				return fmt.Errorf("summary %q: %w", got, errNotYet)
			}
			return nil
		})
		if got := b.text(t, "#force-result"); !strings.Contains(got, "Unlocked") {
			t.Errorf("force unlock said %q", got)
		}
		b.run(t, "back to the list", chromedp.Navigate("http://"+s.addr+"/#/"), chromedp.WaitVisible(chromedp.CSS("#list-view")))
		waitFor(t, 30*time.Second, "the lock gone from the list", func() error {
			if got := s.row(t, key, "token"); got != "" {
				return fmt.Errorf("row still there (token %q): %w", got, errNotYet)
			}
			if got := s.row(t, "shop:inventory:42", "token"); got == "" {
				return fmt.Errorf("the other locks are not listed: %w", errNotYet)
			}
			return nil
		})
	})

	t.Run("NoConsoleErrors", func(t *testing.T) {
		if p := b.takeProblems(); len(p) > 0 {
			t.Fatalf("the browser reported errors:\n%s", strings.Join(p, "\n"))
		}
	})

	t.Run("CrossSiteRequestRefused", func(t *testing.T) {
		_, rtok := s.holdKey(t, "shop:csrf")
		// What a form or script of another site can send: the browser
		// adds Origin and Sec-Fetch-Site, and it cannot add the header.
		for name, h := range map[string]http.Header{
			"form of another site":   {"Content-Type": {"text/plain"}, "Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}},
			"no CSRF header":         {"Content-Type": {"application/json"}},
			"header, another origin": {"Content-Type": {"application/json"}, "X-Turnstile-Csrf": {"1"}, "Origin": {"http://evil.example"}},
			"header, cross-site":     {"Content-Type": {"application/json"}, "X-Turnstile-Csrf": {"1"}, "Sec-Fetch-Site": {"cross-site"}},
		} {
			req, err := http.NewRequest("POST", "http://"+s.addr+"/ui/api/force-release", strings.NewReader(`{"key":"shop:csrf","confirm":"shop:csrf"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h
			// Even with the admin's token (a browser would not have it).
			req.Header.Set("Authorization", "Bearer "+s.admin.bearer())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403", name, resp.StatusCode)
			}
		}
		s.b.run(t, "list shop:csrf", chromedp.Navigate("http://"+s.addr+"/#/"), chromedp.WaitVisible(chromedp.CSS("#list-view")))
		waitFor(t, 30*time.Second, "shop:csrf still held", func() error {
			if got := s.row(t, "shop:csrf", "token"); got != rtok {
				return fmt.Errorf("token %q, want %q: %w", got, rtok, errNotYet)
			}
			return nil
		})
	})

	t.Run("ReadOnlyTokenHasNoUnlock", func(t *testing.T) {
		s.holdKey(t, "shop:readonly")
		b.run(t, "log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-token")))
		s.login(t, s.reader)
		if got := b.text(t, "#who"); got != "role: read" {
			t.Fatalf("role shown %q, want read", got)
		}
		b.run(t, "open a held key's page", chromedp.Navigate("http://"+s.addr+"/#/key/shop:readonly?kind=lock"),
			chromedp.WaitVisible(chromedp.CSS("#key-view")))
		waitFor(t, 30*time.Second, "the key's holder", func() error {
			if got := b.text(t, "#key-state td.token"); got == "" {
				return errNotYet
			}
			return nil
		})
		if b.visible(t, "#force-button") || b.visible(t, "#force-confirm") || b.visible(t, "#force") {
			t.Fatal("a read-only token is shown the force unlock control")
		}
		b.screenshot(t, "read-only")
		if p := b.takeProblems(); len(p) > 0 {
			t.Fatalf("the browser reported errors:\n%s", strings.Join(p, "\n"))
		}
		// A forged request from the page itself, with the reader's token
		// and the CSRF header: the API refuses the role.
		type answer struct {
			Status int
			Code   string
		}
		got := eval[answer](t, b, `fetch('/ui/api/force-release', {method: 'POST',
			headers: {'Content-Type': 'application/json', 'X-Turnstile-Csrf': '1', 'Authorization': 'Bearer ' + sessionStorage.getItem('turnstile-token')},
			body: JSON.stringify({key: 'shop:readonly', confirm: 'shop:readonly'})}).then(async r => ({Status: r.status, Code: (await r.json()).code}))`)
		if got.Status != http.StatusForbidden || got.Code != "permission_denied" {
			t.Errorf("forged force unlock with a read token: %+v, want 403 permission_denied", got)
		}
		// And the API's own ForceRelease, as Connect JSON.
		got = eval[answer](t, b, `fetch('/turnstile.v1.Locks/ForceRelease', {method: 'POST',
			headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + sessionStorage.getItem('turnstile-token')},
			body: JSON.stringify({key: 'shop:readonly'})}).then(async r => ({Status: r.status, Code: (await r.json()).code}))`)
		if got.Status != http.StatusForbidden || got.Code != "permission_denied" {
			t.Errorf("ForceRelease with a read token: %+v, want 403 permission_denied", got)
		}
		waitFor(t, 30*time.Second, "shop:readonly still held", func() error {
			if b.text(t, "#key-state td.token") == "" {
				return fmt.Errorf("the lock was removed: %w", errNotYet)
			}
			return nil
		})
		// The two refusals are the only errors the browser saw.
		for _, p := range b.takeProblems() {
			if !strings.Contains(p, "403") {
				t.Errorf("the browser reported: %s", p)
			}
		}
	})
}

// ttlSeconds reads a TTL cell ("12.3 s", "45 s").
func ttlSeconds(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), " s"), 64)
	if err != nil {
		t.Fatalf("TTL cell %q: %v", s, err)
	}
	return v
}
