package dashboard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
)

// stubAPI answers every call of the API with an error, so that the
// page's own checks are tested alone.
var stubAPI = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(`{"code":"permission_denied","message":"stub"}`))
})

func newTestPage(t *testing.T) *Page {
	t.Helper()
	p, err := New(Options{API: stubAPI, Role: func(http.Header) (string, error) { return "admin", nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRefusesBadOptions(t *testing.T) {
	role := func(http.Header) (string, error) { return "read", nil }
	for name, o := range map[string]Options{
		"no API":       {Role: role},
		"no Role":      {API: stubAPI},
		"window 10001": {API: stubAPI, Role: role, Window: 10_001},
		"window -1":    {API: stubAPI, Role: role, Window: -1},
	} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
}

// Every answer of the page carries the CSP that forbids inline script and
// style and any other origin.
func TestSecurityHeaders(t *testing.T) {
	p := newTestPage(t)
	for _, path := range []string{"/", "/ui/app.js", "/ui/app.css", "/ui/api/session", "/ui/api/nothing", "/ui/nothing"} {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		h := w.Result().Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q allows unsafe sources", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
}

// The page's files load nothing from elsewhere and hold no inline
// script, style or event handler (which the CSP would block anyway).
func TestAssetsSelfContained(t *testing.T) {
	for _, name := range []string{"assets/index.html", "assets/app.js", "assets/app.css"} {
		data, err := assets.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		for _, bad := range []string{"http://", "https://", "//cdn", "style=", " onclick", " onload", "innerHTML", "eval(", "<script>"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s holds %q", name, bad)
			}
		}
	}
}

// A mutating call without the page's header, or from another origin, is
// refused before the API is called.
func TestForceReleaseCSRF(t *testing.T) {
	called := false
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		stubAPI(w, r)
	})
	p, err := New(Options{API: api, Role: func(http.Header) (string, error) { return "admin", nil }})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"key":"k","confirm":"k"}`
	for name, h := range map[string]map[string]string{
		"no header":        {"Content-Type": "application/json"},
		"text/plain form":  {"Content-Type": "text/plain", CSRFHeader: "1"},
		"other origin":     {"Content-Type": "application/json", CSRFHeader: "1", "Origin": "http://evil.example"},
		"cross-site fetch": {"Content-Type": "application/json", CSRFHeader: "1", "Sec-Fetch-Site": "cross-site"},
		"same-site fetch":  {"Content-Type": "application/json", CSRFHeader: "1", "Sec-Fetch-Site": "same-site"},
	} {
		r := httptest.NewRequest("POST", "http://example.com/ui/api/force-release", strings.NewReader(body))
		for k, v := range h {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "cross-site") {
			t.Errorf("%s: %d %s, want 403 cross-site", name, w.Code, w.Body)
		}
	}
	if called {
		t.Error("a cross-site request reached the API")
	}
	// From the page: the API is called (and answers, here, no).
	r := httptest.NewRequest("POST", "http://example.com/ui/api/force-release", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(CSRFHeader, "1")
	r.Header.Set("Origin", "http://example.com")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if !called || w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "permission_denied") {
		t.Errorf("same-origin call: called %v, %d %s", called, w.Code, w.Body)
	}
}

func TestParseForce(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"key":"a","confirm":"a"}`:                                    true,
		`{"key":"a","confirm":"a","kind":"semaphore","permits":"3"}`:   true,
		`{"key":"a","confirm":"b"}`:                                    false,
		`{"key":"","confirm":""}`:                                      false,
		`{"key":"a","confirm":"a","kind":"lock","permits":"2"}`:        false,
		`{"key":"a","confirm":"a","kind":"semaphore","permits":"0"}`:   false,
		`{"key":"a","confirm":"a","kind":"nope"}`:                      false,
		`{"key":"a","confirm":"a","extra":1}`:                          false,
		`{"key":"a","confirm":"a"}{}`:                                  false,
		`[]`:                                                           false,
		`{"key":"` + strings.Repeat("k", maxKey+1) + `","confirm":""}`: false,
	} {
		_, err := parseForce([]byte(body))
		if (err == nil) != ok {
			t.Errorf("%.80s: %v", body, err)
		}
		if err != nil && !errors.Is(err, ErrQuery) {
			t.Errorf("%.80s: %v does not match ErrQuery", body, err)
		}
	}
}

func TestParseListQuery(t *testing.T) {
	for q, ok := range map[string]bool{
		"":                          true,
		"prefix=orders:&page=2":     true,
		"kind=semaphore&permits=4":  true,
		"kind=semaphore":            false,
		"page=-1":                   false,
		"size=0":                    false,
		"size=501":                  false,
		"prefix=a&prefix=b":         false,
		"limit=5":                   false,
		"prefix=%ff":                false,
		"kind=fair&permits=2":       false,
		"page=" + strconv.Itoa(1e9): false,
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseListQuery(v); (err == nil) != ok {
			t.Errorf("%q: %v", q, err)
		}
	}
}

// The levels the charts draw are the alert rules' (deploy/prometheus).
func TestThresholdsAreTheAlertRules(t *testing.T) {
	data, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules := string(data)
	check := func(name, exprPart string, level float64) {
		t.Helper()
		want := strconv.FormatFloat(level, 'g', -1, 64)
		for _, block := range strings.Split(rules, "- alert: ")[1:] {
			if strings.Contains(block, exprPart) && (strings.Contains(block, "> "+want+"\n") || strings.Contains(block, "< "+want+"\n") || strings.Contains(block, ">= "+want+"\n")) {
				return
			}
		}
		t.Errorf("%s: no alert rule on %q at %s", name, exprPart, want)
	}
	for name, th := range Thresholds {
		expr := map[string]string{
			"acquire_p50":             "histogram_quantile(0.5, sum by (job, backend, le) (rate(turnstile_acquire_duration_seconds_bucket",
			"acquire_p99":             "histogram_quantile(0.99, sum by (job, backend, le) (rate(turnstile_acquire_duration_seconds_bucket",
			"acquire_success":         `turnstile_acquisitions_total{outcome="acquired"}`,
			"forced_expiries_per_min": "turnstile_forced_expiries_total",
			"renewal_failures":        `turnstile_renewals_total{outcome!="ok"}`,
		}[name]
		if expr == "" {
			t.Errorf("threshold %s names no alert rule here", name)
			continue
		}
		check(name, expr, th.Warning)
		check(name, expr, th.Critical)
	}
}
