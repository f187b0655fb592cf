package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestAmbiguous(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://alice:hunter2@corp/2024@127.0.0.1:26379":                                   true,
		"redis+sentinel://alice:hunter2@corp/2024@s1,s2/mymaster":                           true,
		"redis://alice:hunter2@corp?2024@127.0.0.1":                                         true,
		"redis://alice:hunter2@corp#2024@127.0.0.1":                                         true,
		"redis://alice:hun/ter2@127.0.0.1":                                                  true,
		"redis://:hun?ter2@127.0.0.1/0":                                                     true,
		"redis:alice:hunter2@corp/2024@h":                                                   true,
		"//alice:hunter2@corp/2024@h":                                                       true,
		"postgres://h:5432/db?application_name=me@x":                                        true,
		"zookeeper://h/chroot@x":                                                            true,
		"redis://alice:hunter2@127.0.0.1:26379/0":                                           false,
		"redis://alice:hun@ter2@127.0.0.1:26379/0":                                          false, // url.Parse takes the last '@' of the authority
		"redis://alice:hun%2Fter2%40corp@127.0.0.1":                                         false,
		"postgres://u@h/db?application_name=me@x":                                           false, // no password
		"postgres://h/db?application_name=me@x":                                             false,
		"fallback://?primary=redis://:pw@h:1&secondary=postgres://u:p@db/l?sslmode=disable": false,
		"fallback://?primary=redis://:pw@h#x@y":                                             true,
		"mem://":                                                                            false,
		"":                                                                                  false,
		"not a url @ all":                                                                   false,
	} {
		if got := Ambiguous(raw); got != want {
			t.Errorf("Ambiguous(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestURLAmbiguous: an ambiguous URL has all that may be its password
// masked, up to the last '@'.
func TestURLAmbiguous(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://alice:hunter2@corp/2024@127.0.0.1:26379", "redis://alice:xxxxx@127.0.0.1:26379"},
		{"redis+sentinel://alice:hunter2@corp?2024@s1,s2/m", "redis+sentinel://alice:xxxxx@s1,s2/m"},
		{"fallback://?primary=redis://alice:hunter2@corp/2024@h&secondary=mem://", "fallback://?primary=redis://alice:xxxxx@h&secondary=mem://"},
		{"fallback://?primary=redis%3A%2F%2Falice%3Ahunter2%40corp%2F2024%40h&secondary=mem://", "fallback://?primary=redis%3A%2F%2Falice%3Axxxxx%40h&secondary=mem://"},
		{"fallback://?primary=redis+sentinel:alice:hunter2@corp/2024@h/m&secondary=mem://", "fallback://?primary=redis+sentinel:xxxxx@h/m&secondary=mem://"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	raw := "redis://alice:hunter2@corp/2024@127.0.0.1:26379"
	err := Error(errors.New(`dial corp:6379: lookup corp: no such host; database "2024@127.0.0.1:26379"`), raw)
	for _, piece := range []string{"hunter2", "corp", "2024"} {
		if strings.Contains(err.Error(), piece) {
			t.Errorf("Error shows %q: %v", piece, err)
		}
	}
}

func TestSecretParam(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "pasword": true, "passowrd": true, "pssword": true, "Pasword": true, "ssl_pasword": true,
		"passwrd": true, "scret": true, "tokn": true, "credentails": true, "sslpassword": true, "api_key": true,
		"password_file": false, "key_file": false, "prefix": false, "session_timeout": false, "sslmode": false,
		"application_name": false, "search_path": false, "node_timeout": false, "connect_timeout": false,
		"protocol": false, "wait_replicas": false, "grace": false, "primary": false, "secondary": false,
	} {
		if got := SecretParam(name); got != want {
			t.Errorf("SecretParam(%q) = %v, want %v", name, got, want)
		}
	}
}

// holder is an error that names a parameter and holds its value.
type holder struct{ name, value string }

func (h *holder) Error() string          { return fmt.Sprintf("unknown query parameter %q", h.name) }
func (h *holder) HeldParams() url.Values { return url.Values{h.name: {h.value}} }

// TestErrorHolder: the value a Holder in the chain holds is masked in
// the whole message, the URL repeated around it included, in every
// form; and again when the masked error is wrapped in one that shows a
// URL holding the first one, percent-encoded.
func TestErrorHolder(t *testing.T) {
	inner := "redis://h?pw=s3cr%40tPW"
	err := Error(fmt.Errorf("open %s: %w", inner, &holder{"pw", "s3cr@tPW"}), inner)
	if got, want := err.Error(), `open redis://h?xxxxx: unknown query parameter "pw"`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	outer := "fallback://?primary=redis%3A%2F%2Fh%3Fpw%3Ds3cr%2540tPW"
	err = Error(fmt.Errorf("open %s: primary: %w", outer, err), outer)
	if strings.Contains(err.Error(), "tPW") {
		t.Errorf("the outer error shows the value: %v", err)
	}
	var h *holder
	if errors.As(err, &h) {
		t.Error("errors.As found the holder through the masked error")
	}
}

// TestErrorHolderShortValue: a short value (on, ack) is masked where it
// is a parameter's value, and nowhere else: the words of the message
// that contain it stay, and so does errors.Is.
func TestErrorHolderShortValue(t *testing.T) {
	base := errors.New("turnstile: invalid backend url")
	raw := "fallback://?ack=ack"
	err := Error(fmt.Errorf("open %s: %w: %w", raw, base, &holder{"ack", "ack"}), raw)
	if got, want := err.Error(), `open fallback://?xxxxx: turnstile: invalid backend url: unknown query parameter "ack"`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if !errors.Is(err, base) {
		t.Errorf("errors.Is(%v, base) = false", err)
	}
}

// TestErrorShortSecretInWords: a short secret is masked where it stands
// as a word, not inside a longer one, and a sentinel whose message held
// it still matches errors.Is.
func TestErrorShortSecretInWords(t *testing.T) {
	sentinel := errors.New("turnstile: invalid backend url")
	err := Error(fmt.Errorf("%w: scheme %q: user ile", sentinel, "a"), "a:ile@h")
	if got, want := err.Error(), `turnstile: invalid backend url: scheme "a": user xxxxx`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(%v, sentinel) = false", err)
	}
	// A target of a type that == cannot compare.
	if errors.Is(err, uncomparable{}) {
		t.Error("errors.Is matched an unrelated error")
	}
}

type uncomparable struct{ _ []int }

func (uncomparable) Error() string { return "uncomparable" }
