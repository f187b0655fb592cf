package cli

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redact"
)

// A URL is shown with its password and every query value masked; a
// misspelled secret parameter is a secret too. Values that are URLs are
// shown the same way, where they stand.
func TestMaskURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"redis://h:1", "redis://h:1"},
		{"redis://u:" + secretPW + "@h:1/0", "redis://u:xxxxx@h:1/0"},
		{"redis://h:1/?pasword=" + secretPW, "redis://h:1/?pasword=xxxxx"},
		{"redis://h:1/?prefix=app:&sslpasword=" + secretPW + "&dial_timeout=5s&x=y", "redis://h:1/?prefix=app:&sslpasword=xxxxx&dial_timeout=5s&x=xxxxx"},
		{"redis://h:1/?password=" + secretPW + "&flag", "redis://h:1/?password=xxxxx&flag"},
		{"fallback://?primary=" + url.QueryEscape("redis://u:"+secretPW+"@r:1/?pasword="+secretPW) + "&grace=31s",
			"fallback://?primary=" + url.QueryEscape("redis://u:xxxxx@r:1/?pasword=xxxxx") + "&grace=31s"},
		{"fallback://?secondary=postgres://db/x?pasword=" + secretPW, "fallback://?secondary=postgres://db/x?pasword=xxxxx"},
		{"not a url", "not a url"},
	} {
		if got := MaskURL(tc.raw); got != tc.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// HideURL changes only the message: errors.Is still finds the sentinel.
func TestHideURL(t *testing.T) {
	t.Parallel()
	raw := "redis://u:" + secretPW + "@h:1/?pasword=" + secretPW
	// As turnstile.Open words it: the URL as redact.URL shows it.
	err := fmt.Errorf("turnstile: open %s: %w: unknown query parameter %q", redact.URL(raw), turnstile.ErrInvalidURL, "pasword")
	got := HideURL(err, raw)
	if strings.Contains(got.Error(), secretPW) {
		t.Errorf("HideURL shows the secret: %q", got)
	}
	if want := "open redis://u:xxxxx@h:1/?pasword=xxxxx: "; !strings.Contains(got.Error(), want) {
		t.Errorf("HideURL = %q, want it to say %q", got, want)
	}
	if !errors.Is(got, turnstile.ErrInvalidURL) {
		t.Errorf("errors.Is(HideURL(...), ErrInvalidURL) = false")
	}
	plain := errors.New("connection refused")
	if HideURL(plain, raw) != plain || HideURL(nil, raw) != nil {
		t.Error("HideURL changed an error that shows no URL")
	}
}

// An argument that is a URL, quoted in a message, shows no secret; any
// other argument is quoted as %q does.
func TestQuoteArg(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ arg, want string }{
		{"redis://u:" + secretPW + "@h:1", `"redis://u:xxxxx@h:1"`},
		{"redis://h/?pasword=" + secretPW, `"redis://h/?pasword=xxxxx"`},
		{"lock:report", `"lock:report"`},
		{"a\nb", `"a\nb"`},
	} {
		if got := QuoteArg(tc.arg); got != tc.want {
			t.Errorf("QuoteArg(%q) = %s, want %s", tc.arg, got, tc.want)
		}
	}
	msg := `invalid value "redis://u:` + secretPW + `@h:1/?x=` + secretPW + `" for flag -ttl: want a duration; see redis://h:1.`
	if got, want := Scrub(msg), `invalid value "redis://u:xxxxx@h:1/?x=xxxxx" for flag -ttl: want a duration; see redis://h:1.`; got != want {
		t.Errorf("Scrub = %q, want %q", got, want)
	}
}

// A value that is not a URL at all — a password in the wrong file or
// variable — is refused without a byte of it; two names of the URL flag
// given together are refused without the URLs.
func TestBackendNotShown(t *testing.T) {
	t.Parallel()
	pwFile := fileWith(t, "pw", secretPW+"\n")
	colonFile := fileWith(t, "colon", "user:"+secretPW+"\n")
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"password file", []string{"--backend-file", pwFile}, "", "--backend-file " + pwFile + ": the file's content is not a URL (8 bytes)"},
		{"user:password file", []string{"--backend-file", colonFile}, "", "--backend-file " + colonFile + ": the file's content is not a URL (13 bytes)"},
		{"password in the variable", nil, secretPW, "$TURNSTILE_BACKEND is not a URL (8 bytes)"},
		{"password as the flag", []string{"--backend", secretPW}, "", "--backend is not a URL (8 bytes)"},
		{"scheme-less", []string{"--backend", "//u:" + secretPW + "@h"}, "", "--backend is not a URL"},
		{"old and new name", []string{"--url", "redis://u:" + secretPW + "@a", "--backend", "redis://u:" + secretPW + "@b"}, "", "--url and --backend name the same thing: give one"},
	} {
		b, err := parseURLFlags(tc.args)
		if err == nil {
			_, _, err = b.Resolve(backendEnv(tc.env))
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "r3tPW") {
			t.Errorf("%s: error %q shows the secret", tc.name, err)
		}
	}
	// A URL of a scheme turnstile does not have is still a URL: the
	// store's error names the scheme.
	var b BackendFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	b.Register(fs, "backend")
	if err := fs.Parse([]string{"--backend", "http://h"}); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := b.Resolve(nil); err != nil || raw != "http://h" {
		t.Errorf("Resolve(http://h) = %q, %v", raw, err)
	}
}

// FuzzMaskURL: whatever a query value holds, no way the commands show a
// URL shows it.
func FuzzMaskURL(f *testing.F) {
	for _, s := range [][2]string{{"pasword", secretPW}, {"password", "a&b=c"}, {"x", "redis://u:" + secretPW + "@h"}, {"0", "00000://"}, {"prefix", "%zz" + secretPW}, {"", "?" + secretPW}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, secret string) {
		if strings.ContainsAny(name, "&=#?%+ \"") || slices.Contains(shownParams, strings.ToLower(name)) || isURLParam(name) || len(secret) < 8 {
			return
		}
		base := "redis://h:1/?a=1&" + name + "="
		if strings.Contains(base+redact.Mask, secret) || strings.Contains(secret, redact.Mask) {
			return
		}
		raw := base + url.QueryEscape(secret)
		for how, shown := range map[string]string{
			"MaskURL":  MaskURL(raw),
			"QuoteArg": QuoteArg(raw),
			"HideURL":  HideURL(fmt.Errorf("turnstile: open %s: %w", redact.URL(raw), turnstile.ErrInvalidURL), raw).Error(),
			"Scrub":    Scrub(fmt.Sprintf("invalid value %q for flag -ttl: %s", raw, "want a duration")),
		} {
			if strings.Contains(shown, secret) || strings.Contains(shown, url.QueryEscape(secret)) {
				t.Fatalf("%s shows %q: %q", how, secret, shown)
			}
		}
		// Outside quotes a URL ends at a space.
		if !strings.ContainsFunc(name, unicode.IsSpace) {
			if shown := Scrub("--backend " + raw + ": refused"); strings.Contains(shown, secret) || strings.Contains(shown, url.QueryEscape(secret)) {
				t.Fatalf("Scrub shows %q: %q", secret, shown)
			}
		}
	})
}
