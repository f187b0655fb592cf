package cli

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile/internal/redact"
)

// A command shows a store URL with its password masked, and the value of
// every query parameter but those of shownParams: package redact masks
// the parameters whose names look secret, but a misspelled one (pasword=,
// sslpassw0rd=) is a secret too, and nothing can tell it from an unknown
// parameter. The names stay, so that a message about an unknown parameter
// still shows where it is. The value of a parameter that names a store
// (urlParams: the stores of a fallback:// URL) is shown the same way
// rather than masked whole.

// shownParams are the query parameters whose values a command shows: the
// stores' own parameters (docs/cli.md), none of them secret, and libpq's
// usual ones. A parameter added to a store and not here is masked, which
// is safe.
var shownParams = []string{
	"prefix", "dial_timeout", "flush_delay", "protocol", "fence_grace", "wait_replicas", "wait_timeout",
	"node_timeout", "quarantine", "fencing", "session_timeout", "lock_conns", "op_timeout", "conns",
	"grace", "trip_after", "open_timeout", "tls", "tls_user", "ca_file", "cert_file", "key_file",
	"server_name", "password_file", "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout",
	"application_name", "search_path", "target_session_attrs",
}

// urlParams are the query parameters whose values are store URLs.
var urlParams = []string{"primary", "secondary"}

// MaskURL returns raw as a command shows it: redact.URL's form, with the
// value of every query parameter not in shownParams masked too. The query
// is masked first: redact.URL may take a stray '@' in it for the end of
// a password and mask the '?' away with it.
func MaskURL(raw string) string {
	return redact.URL(maskQuery(raw, 0))
}

// maxNesting bounds how deep URLs in query values are followed.
const maxNesting = 4

// maskQuery masks the value of every query parameter of u not in
// shownParams, and shows the store URL of one in urlParams as maskQuery
// does.
func maskQuery(u string, depth int) string {
	base, query, ok := strings.Cut(u, "?")
	if !ok || query == "" {
		return u
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		name, value, ok := strings.Cut(p, "=")
		if !ok || value == "" || value == redact.Mask {
			continue
		}
		if dec, err := url.QueryUnescape(value); err == nil && isURLParam(name) && depth < maxNesting {
			inner := maskQuery(dec, depth+1)
			if dec != value {
				inner = url.QueryEscape(inner)
			}
			params[i] = name + "=" + inner
			continue
		}
		if !slices.Contains(shownParams, strings.ToLower(name)) {
			params[i] = name + "=" + redact.Mask
		}
	}
	return base + "?" + strings.Join(params, "&")
}

// QuoteArg quotes a command-line argument for a message, as %q does, but
// as MaskURL shows it if it looks like a URL: a URL typed where it does
// not belong must not be echoed with its password.
func QuoteArg(arg string) string {
	if strings.Contains(arg, "://") || strings.Contains(arg, "@") || strings.Contains(arg, "?") {
		arg = MaskURL(arg)
	}
	return strconv.Quote(arg)
}

// quotedInText finds a string quoted as %q quotes it, and urlInText what
// looks like a URL outside quotes: a scheme, "://" and what follows up to
// a space or a quote.
var (
	quotedInText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	urlInText    = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"]*`)
)

// Scrub returns msg with every URL in it shown as MaskURL shows it: the
// last line of defence for messages that quote what they were given,
// such as the flag package's "invalid value ... for flag". A quoted URL
// is read whole; one outside quotes ends at a space.
func Scrub(msg string) string {
	var b strings.Builder
	last := 0
	for _, m := range quotedInText.FindAllStringIndex(msg, -1) {
		b.WriteString(scrubBare(msg[last:m[0]]))
		q := msg[m[0]:m[1]]
		if s, err := strconv.Unquote(q); err == nil && strings.Contains(s, "://") {
			q = QuoteArg(s)
		}
		b.WriteString(q)
		last = m[1]
	}
	b.WriteString(scrubBare(msg[last:]))
	return b.String()
}

// scrubBare is Scrub for text without quotes.
func scrubBare(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(u string) string {
		// Punctuation after a URL ends a sentence, not the URL.
		trimmed := strings.TrimRight(u, ":,.;)")
		return MaskURL(trimmed) + u[len(trimmed):]
	})
}

// HideURL returns err, unchanged for errors.Is and errors.As, with a
// message that shows the URL raw (as given, or as redact.URL shows it)
// only as MaskURL does, as well as the store URLs in its query values.
// The library names the store it failed to open by its URL with the
// password masked; a misspelled secret parameter would still show.
func HideURL(err error, raw string) error {
	if err == nil || raw == "" {
		return err
	}
	msg := err.Error()
	shown := msg
	for _, form := range urlForms(raw, 0) {
		masked := MaskURL(form)
		if masked == form {
			continue
		}
		shown = strings.ReplaceAll(shown, form, masked)
		if r := redact.URL(form); r != form {
			shown = strings.ReplaceAll(shown, r, masked)
		}
	}
	shown = Scrub(shown)
	if shown == msg {
		return err
	}
	return &hiddenURLError{msg: shown, err: err}
}

// urlForms are raw and the URLs in its query values, decoded, longest
// first: the forms in which a message may show them.
func urlForms(raw string, depth int) []string {
	forms := []string{raw}
	_, query, ok := strings.Cut(raw, "?")
	if !ok || depth >= maxNesting {
		return forms
	}
	for _, p := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(p, "=")
		if dec, err := url.QueryUnescape(value); err == nil && isURLParam(name) {
			forms = append(forms, urlForms(dec, depth+1)...)
		}
	}
	return forms
}

func isURLParam(name string) bool { return slices.Contains(urlParams, strings.ToLower(name)) }

// hiddenURLError is an error whose message shows no query value of a URL.
type hiddenURLError struct {
	msg string
	err error
}

func (e *hiddenURLError) Error() string { return e.msg }
func (e *hiddenURLError) Unwrap() error { return e.err }
