package redis

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// A Redis 6+ ACL user may lack a command, a key pattern or a channel
// pattern that turnstile needs. The server's refusal does not always say
// which: outside a script, NOPERM names the command but not the key or
// channel; inside a script, Redis 7.0 says only that "the user executing
// the script can't" do something, with the script's line. storeError
// turns such a refusal into an error that matches turnstile.ErrPermission
// and names what was refused, read from the call and the script's line;
// and an authentication failure (WRONGPASS, NOAUTH) into one that says
// so. Every other error is returned as it is.

// PermissionError is a Redis ACL refusal: the server refused a command,
// a key or a channel to the user turnstile connects as. It matches
// turnstile.ErrPermission and wraps the server's error reply.
type PermissionError struct {
	// Command is the refused command, lower-case ("evalsha", or a
	// command a script calls, e.g. "spublish"), when the refusal is of a
	// command; else "".
	Command string
	// Keys are the keys of the call when a key was refused (one of them
	// at least is outside the user's key patterns, ACL ~pattern).
	Keys []string
	// Channels are the channels of the call when a channel was refused
	// (ACL &pattern).
	Channels []string
	// Err is the server's reply.
	Err error
}

func (e *PermissionError) Error() string {
	var b strings.Builder
	b.WriteString("redis: permission denied: ")
	switch {
	case e.Command != "":
		b.WriteString("the ACL user may not run " + strings.ToUpper(e.Command) + " (ACL: +" + e.Command + ")")
	case len(e.Keys) > 0:
		b.WriteString("the ACL user's key patterns (ACL: ~pattern) do not cover ")
		b.WriteString(strings.Join(quoted(e.Keys), " or "))
	case len(e.Channels) > 0:
		b.WriteString("the ACL user's channel patterns (ACL: &pattern) do not cover ")
		b.WriteString(strings.Join(quoted(e.Channels), " or "))
	default:
		b.WriteString("the ACL user may not do what turnstile asked")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap makes the error match turnstile.ErrPermission and the reply.
func (e *PermissionError) Unwrap() []error {
	if e.Err == nil {
		return []error{turnstile.ErrPermission}
	}
	return []error{turnstile.ErrPermission, e.Err}
}

// AuthError is the server's refusal of the user and password turnstile
// connects with (WRONGPASS, NOAUTH). The password is in no message.
type AuthError struct {
	Err error // the server's reply
}

func (e *AuthError) Error() string {
	return "redis: authentication failed (check the URL's user and password, or password_file): " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// quoted puts each name in Go quotes, so that a key with spaces or
// control characters stays readable and on one line.
func quoted(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

var (
	// quotedCommand is the command NOPERM names: "... run the 'evalsha'
	// command".
	quotedCommand = regexp.MustCompile(`'([a-z0-9_|-]+)' command`)
	// scriptLine is where in a script the error happened: "... on
	// @user_script:27."
	scriptLine = regexp.MustCompile(`@user_script:(\d+)`)
	// luaCall is the command of a script line: redis.call('SPUBLISH', ...).
	luaCall = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)
	// luaArg is a script line's KEYS[n] or ARGV[n].
	luaArg = regexp.MustCompile(`(KEYS|ARGV)\[(\d+)\]`)
)

// storeError classifies err, the outcome of running src (a script's
// source; "" for a plain command) with c's keys and arguments; channel
// is the channel of a subscription ("" otherwise).
func storeError(err error, src string, c call, channel string) error {
	if err == nil {
		return nil
	}
	var pe *PermissionError
	var ae *AuthError
	if errors.As(err, &pe) || errors.As(err, &ae) {
		return err // classified already
	}
	msg, ok := replyText(err)
	if !ok {
		return err
	}
	switch {
	case strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH"):
		return &AuthError{Err: err}
	case strings.HasPrefix(msg, "NOPERM"),
		strings.Contains(msg, "The user executing the script can't"):
	default:
		return err
	}
	pe = &PermissionError{Err: err}
	low := strings.ToLower(msg)
	line := srcLine(src, msg)
	if m := quotedCommand.FindStringSubmatch(msg); m != nil {
		pe.Command = m[1] // "... run the 'evalsha' command"
		return pe
	}
	switch {
	case strings.Contains(low, "channel") || strings.Contains(low, "publish to"):
		if channel != "" {
			pe.Channels = []string{channel}
		} else {
			pe.Channels = callArgs(line, c, true)
		}
	case strings.Contains(low, " key"):
		pe.Keys = callArgs(line, c, false)
	default: // Redis 7.0 inside a script: "can't run this command"
		if m := luaCall.FindStringSubmatch(line); m != nil {
			pe.Command = strings.ToLower(m[1])
		}
	}
	return pe
}

// replyText is the text of a server's error reply, or ok=false for any
// other error (a broken connection, a context's end).
func replyText(err error) (string, bool) {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.Error(), true
	}
	var ge goredis.Error
	if errors.As(err, &ge) {
		return ge.Error(), true
	}
	return "", false
}

// srcLine is the line of src that msg says the error happened on, or "".
func srcLine(src, msg string) string {
	m := scriptLine.FindStringSubmatch(msg)
	if m == nil || src == "" {
		return ""
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return ""
	}
	for i, l := range strings.Split(src, "\n") {
		if i == n-1 {
			return l
		}
	}
	return ""
}

// callArgs names what a refused script line touched: the KEYS[n] or
// ARGV[n] it names. Without such a line (a refusal before the script
// ran, or a line that names a local variable), it is every key of the
// call, or for a channel every argument that is a release channel.
func callArgs(line string, c call, channel bool) []string {
	for _, m := range luaArg.FindAllStringSubmatch(line, -1) {
		i, err := strconv.Atoi(m[2])
		if err != nil || i < 1 {
			continue
		}
		if m[1] == "KEYS" && !channel && i <= len(c.keys) {
			return []string{c.keys[i-1]}
		}
		if m[1] == "ARGV" && channel && i <= len(c.args) {
			return []string{c.args[i-1]}
		}
	}
	if !channel {
		return c.keys
	}
	var chans []string
	for _, a := range c.args {
		if strings.HasSuffix(a, "}:released") {
			chans = append(chans, a)
		}
	}
	return chans
}
