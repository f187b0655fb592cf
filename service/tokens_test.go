package service_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/service"
)

const goodSecret = "secret=sha256:00112233445566778899aabbccddeeff:" +
	"0000000000000000000000000000000000000000000000000000000000000000"

// TestParseTokensRefuses: every wrong line is refused with its line
// number and what is wrong, and no secret in the message.
func TestParseTokensRefuses(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"", "no token in it"},
		{"# only a comment\n\n", "no token in it"},
		{"name=a role=lock prefix=a:\n", "line 1: no secret="},
		{"role=lock prefix=a: " + goodSecret, "no name="},
		{"name=a prefix=a: " + goodSecret, "no role="},
		{"name=a role=lock " + goodSecret, "no prefix="},
		{"name=a role=root prefix=a: " + goodSecret, `role "root"`},
		{"name=a.b role=lock prefix=a: " + goodSecret, `name "a.b"`},
		{"name=a role=lock prefix= " + goodSecret, "empty prefix="},
		{"name=a role=lock prefix=a: secret=md5:00:11", "secret: want sha256:SALT:HASH"},
		{"name=a role=lock prefix=a: secret=sha256:zz:00", "SALT is not"},
		{"name=a role=lock prefix=a: secret=sha256:0011223344556677:00", "HASH is not 32 bytes"},
		{"name=a role=lock prefix=a: " + goodSecret + " rate=0", `rate "0"`},
		{"name=a role=lock prefix=a: " + goodSecret + " burst=3", "burst= without rate="},
		{"name=a role=lock prefix=a: " + goodSecret + " colour=blue", `unknown field "colour"`},
		{"name=a role=lock role=read prefix=a: " + goodSecret, "role is given twice"},
		{"name=a role=lock prefix=a: " + goodSecret + "\nname=a role=read prefix=a: " + goodSecret, `line 2: name "a" is given twice`},
		{"name=a role=lock prefix=a: " + goodSecret + " nonsense", `"nonsense" is not name=value`},
	} {
		_, err := service.ParseTokens(strings.NewReader(c.file))
		if !errors.Is(err, service.ErrTokensFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error of the tokens file saying %q", c.file, err, c.want)
		}
	}
	// A secret pasted where a name goes is not shown whole.
	secret := strings.Repeat("S3CRET", 12)
	_, err := service.ParseTokens(strings.NewReader("name=" + secret + " role=lock prefix=a: " + goodSecret))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("an error quotes a long value whole: %v", err)
	}
}

// TestNewTokenRoundTrip: a token "turnstile serve token" makes is
// accepted by the file line it makes, and by nothing else.
func TestNewTokenRoundTrip(t *testing.T) {
	bearer, line, err := service.NewToken("orders", "lock", []string{"orders:", "payments:"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, strings.SplitN(bearer, ".", 2)[1]) {
		t.Fatal("the file line holds the secret itself")
	}
	ts, err := service.ParseTokens(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := service.Check(ts, bearer); !ok {
		t.Fatal("the token is refused by its own line")
	}
	if ok, _ := service.Check(ts, bearer+"x"); ok {
		t.Fatal("a wrong secret is accepted")
	}
	for _, bad := range [][]string{nil, {""}, {"has space"}} {
		if _, _, err := service.NewToken("x", "lock", bad); err == nil {
			t.Errorf("NewToken with prefixes %q: no error", bad)
		}
	}
	if _, _, err := service.NewToken("x", "root", []string{"*"}); err == nil {
		t.Error("NewToken with role root: no error")
	}
}

// FuzzParseTokens: ParseTokens never panics; what it refuses gets an
// error of the tokens file that names a line; what it accepts holds at
// least one token, and no bearer value made of the file's own text is
// accepted unless it carries the secret.
func FuzzParseTokens(f *testing.F) {
	f.Add("name=a role=lock prefix=a: " + goodSecret)
	f.Add("name=a role=admin prefix=* " + goodSecret + " rate=10 burst=20\n# c\nname=b role=read prefix=b: " + goodSecret)
	f.Add("name=a role=lock prefix=a: secret=sha256::")
	f.Add("=\n==\nname==a")
	f.Add(strings.Repeat("x", 70000))
	f.Fuzz(func(t *testing.T, file string) {
		ts, err := service.ParseTokens(strings.NewReader(file))
		if err != nil {
			if ts != nil || !errors.Is(err, service.ErrTokensFile) {
				t.Fatalf("ParseTokens(%q) = %v, %v", file, ts, err)
			}
			return
		}
		if ts.Len() == 0 {
			t.Fatalf("ParseTokens(%q) accepted a file without tokens", file)
		}
		for _, field := range strings.Fields(file) {
			if ok, _ := service.Check(ts, field); ok {
				t.Fatalf("the file's own text %q is accepted as a token", field)
			}
		}
	})
}
