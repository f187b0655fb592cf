package service

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile/admission"
)

// The tokens file: one bearer token a line, as fields name=value
// separated by spaces; '#' starts a comment line.
//
//	name=orders role=lock prefix=orders: prefix=payments: secret=sha256:SALT:HASH rate=200 burst=400
//
//	name    1 to 64 letters, digits, '_' or '-': the tenant, in logs and
//	        metrics, and the part of the token before the '.'
//	role    read (Status, List, Watch, Info, Leader, Observe), lock (read,
//	        and take, renew, release, hold, campaign, resign) or admin
//	        (lock, and ForceRelease)
//	prefix  a key prefix the token may use, once per prefix; "*" is every
//	        key. A key is the token's if it starts with one of them.
//	secret  sha256:SALT:HASH, SALT 16 bytes and HASH = SHA-256(SALT ||
//	        secret), in hex ("turnstile serve token" makes the line)
//	rate    calls a second the token may make on one instance (a number;
//	        default: no limit); burst, how many at once (default: rate,
//	        at least 1)
//
// A client sends "Authorization: Bearer NAME.SECRET".
//
// Why a salted SHA-256 and not a slow password hash: the secrets are 130
// random bits that turnstile makes, not passwords people choose, so
// trying secrets against a stolen hash is hopeless at any speed; a slow
// hash would only slow every call down. The salt keeps two tenants with
// one secret apart in the file.

// maxTokensFile bounds what a tokens file may hold.
const maxTokensFile = 4 << 20

// ErrTokensFile marks an error in a tokens file. Its message names the
// line and field, never a secret.
var ErrTokensFile = errors.New("tokens file")

type role uint8

const (
	roleRead role = iota + 1
	roleLock
	roleAdmin
)

var roleNames = map[string]role{"read": roleRead, "lock": roleLock, "admin": roleAdmin}

func (r role) String() string {
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return "none"
}

// Token is one entry of a tokens file.
type Token struct {
	Name     string
	role     role
	Prefixes []string // "" for every key
	salt     []byte
	hash     []byte
	Rate     float64
	Burst    int
	limiter  *admission.Local
}

// TokenSet is the tokens an instance accepts.
type TokenSet struct {
	byName map[string]*Token
}

// Len returns how many tokens the set holds.
func (t *TokenSet) Len() int { return len(t.byName) }

// ReadTokensFile reads the tokens file at path.
func ReadTokensFile(path string) (*TokenSet, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%w %s: %w", ErrTokensFile, path, err)
	}
	defer f.Close()
	ts, err := ParseTokens(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, nil
}

// ParseTokens reads a tokens file's content.
func ParseTokens(r io.Reader) (*TokenSet, error) {
	ts := &TokenSet{byName: map[string]*Token{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n, size := 0, 0
	for sc.Scan() {
		n++
		size += len(sc.Bytes()) + 1
		if size > maxTokensFile {
			return nil, fmt.Errorf("%w: larger than %d MiB", ErrTokensFile, maxTokensFile>>20)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseToken(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokensFile, n, err)
		}
		if _, dup := ts.byName[t.Name]; dup {
			return nil, fmt.Errorf("%w: line %d: name %q is given twice", ErrTokensFile, n, t.Name)
		}
		ts.byName[t.Name] = t
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %w", ErrTokensFile, n+1, err)
	}
	if len(ts.byName) == 0 {
		return nil, fmt.Errorf("%w: no token in it", ErrTokensFile)
	}
	return ts, nil
}

func parseToken(line string) (*Token, error) {
	t := &Token{}
	seen := map[string]bool{}
	for _, field := range strings.Fields(line) {
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=value", clip(field))
		}
		if seen[name] && name != "prefix" {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		if err := t.set(name, value); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"name", "role", "prefix", "secret"} {
		if !seen[f] {
			return nil, fmt.Errorf("no %s=", f)
		}
	}
	if t.Rate > 0 {
		if t.Burst == 0 {
			t.Burst = max(1, int(math.Ceil(t.Rate)))
		}
		lim, err := admission.NewLocal(admission.Limit{Rate: t.Rate, Burst: t.Burst}, admission.WithMaxKeys(1))
		if err != nil {
			return nil, fmt.Errorf("rate=%v burst=%d: %w", t.Rate, t.Burst, err)
		}
		t.limiter = lim
	} else if seen["burst"] {
		return nil, errors.New("burst= without rate=")
	}
	return t, nil
}

func (t *Token) set(name, value string) error {
	switch name {
	case "name":
		if !validName(value) {
			return fmt.Errorf("name %q: want 1 to 64 letters, digits, '_' or '-'", clip(value))
		}
		t.Name = value
	case "role":
		r, ok := roleNames[value]
		if !ok {
			return fmt.Errorf("role %q: want read, lock or admin", clip(value))
		}
		t.role = r
	case "prefix":
		switch {
		case value == "*":
			value = ""
		case value == "":
			return errors.New(`empty prefix=: give a key prefix, or "*" for every key`)
		case len(value) > 512:
			return fmt.Errorf("prefix of %d bytes: longer than a key", len(value))
		}
		if !slices.Contains(t.Prefixes, value) {
			t.Prefixes = append(t.Prefixes, value)
		}
	case "secret":
		salt, hash, err := parseHash(value)
		if err != nil {
			return fmt.Errorf("secret: %w", err)
		}
		t.salt, t.hash = salt, hash
	case "rate":
		r, err := strconv.ParseFloat(value, 64)
		if err != nil || !(r > 0) || r > admission.MaxRate {
			return fmt.Errorf("rate %q: want calls a second, a number in (0, %g]", clip(value), float64(admission.MaxRate))
		}
		t.Rate = r
	case "burst":
		b, err := strconv.Atoi(value)
		if err != nil || b < 1 || b > 1<<20 {
			return fmt.Errorf("burst %q: want a whole number in [1, %d]", clip(value), 1<<20)
		}
		t.Burst = b
	default:
		return fmt.Errorf("unknown field %q (known: name, role, prefix, secret, rate, burst)", clip(name))
	}
	return nil
}

// parseHash reads sha256:SALT:HASH. Its errors never quote the value.
func parseHash(v string) (salt, hash []byte, err error) {
	algo, rest, ok := strings.Cut(v, ":")
	if !ok || algo != "sha256" {
		return nil, nil, errors.New("want sha256:SALT:HASH, as \"turnstile serve token\" writes it")
	}
	s, h, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, nil, errors.New("want sha256:SALT:HASH: no HASH")
	}
	salt, err = hex.DecodeString(s)
	if err != nil || len(salt) < 8 || len(salt) > 64 {
		return nil, nil, errors.New("SALT is not 8 to 64 bytes of hex")
	}
	hash, err = hex.DecodeString(h)
	if err != nil || len(hash) != sha256.Size {
		return nil, nil, errors.New("HASH is not 32 bytes of hex")
	}
	return salt, hash, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// clip quotes at most 40 bytes of what a line held, so that an error
// never carries a long secret pasted into the wrong field in full.
func clip(s string) string {
	if len(s) > 40 {
		return s[:16] + "…"
	}
	return s
}

// lookup returns the token a bearer value names, if its secret is right.
func (t *TokenSet) lookup(bearer string) (*Token, bool) {
	name, secret, ok := strings.Cut(bearer, ".")
	if !ok || t == nil {
		return nil, false
	}
	tok, ok := t.byName[name]
	if !ok {
		return nil, false
	}
	return tok, subtle.ConstantTimeCompare(hashSecret(tok.salt, secret), tok.hash) == 1
}

func hashSecret(salt []byte, secret string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(secret))
	return h.Sum(nil)
}

// NewToken makes a token: the bearer value to give the client
// (NAME.SECRET) and the tokens file's line for it.
func NewToken(name, roleName string, prefixes []string) (bearer, line string, err error) {
	if !validName(name) {
		return "", "", fmt.Errorf("name %q: want 1 to 64 letters, digits, '_' or '-'", clip(name))
	}
	if _, ok := roleNames[roleName]; !ok {
		return "", "", fmt.Errorf("role %q: want read, lock or admin", clip(roleName))
	}
	if len(prefixes) == 0 {
		return "", "", errors.New(`no prefix: give the key prefixes the token may use, or "*" for every key`)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name=%s role=%s", name, roleName)
	for _, p := range prefixes {
		if p == "" || strings.ContainsAny(p, " \t\r\n") {
			return "", "", fmt.Errorf("prefix %q: want a key prefix without spaces, or \"*\"", clip(p))
		}
		fmt.Fprintf(&b, " prefix=%s", p)
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", "", err
	}
	secret := rand.Text()
	fmt.Fprintf(&b, " secret=sha256:%s:%s", hex.EncodeToString(salt), hex.EncodeToString(hashSecret(salt, secret)))
	return name + "." + secret, b.String(), nil
}
