package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
)

// replyErr is a server's error reply as go-redis returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestStoreErrorMessages: storeError reads the refusals of Redis 7.0 and
// of later versions (whose messages differ, NOPERM inside scripts too)
// and names what was refused; other errors pass unchanged.
func TestStoreErrorMessages(t *testing.T) {
	src := sources[releaseScript]
	line := func(needle string) int {
		for i, l := range strings.Split(src, "\n") {
			if strings.Contains(l, needle) {
				return i + 1
			}
		}
		t.Fatalf("no line %q in the release script", needle)
		return 0
	}
	spublish := line("redis.call('SPUBLISH'")
	del := line("redis.call('DEL', KEYS[1])")
	c := call{keys: []string{"app:{k}", "app:{k}:fence"}, args: []string{"owner", "10000", "app:{k}:released"}}
	in := func(format string, n int) string { return fmt.Sprintf(format, "0123abcd", n) }
	for _, tt := range []struct {
		name    string
		reply   string
		channel string
		want    string // "" for an error left as it is
	}{
		{"7.0 command", "NOPERM this user has no permissions to run the 'evalsha' command", "", "may not run EVALSHA (ACL: +evalsha)"},
		{"7.2 command", "NOPERM User turnstile has no permissions to run the 'evalsha' command", "", "may not run EVALSHA"},
		{"subcommand", "NOPERM this user has no permissions to run the 'cluster|slots' command", "", "may not run CLUSTER|SLOTS (ACL: +cluster|slots)"},
		{"7.0 keys", "NOPERM this user has no permissions to access one of the keys used as arguments", "", `do not cover "app:{k}" or "app:{k}:fence"`},
		{"7.2 key", "NOPERM No permissions to access a key", "", `"app:{k}" or "app:{k}:fence"`},
		{"7.0 channel", "NOPERM this user has no permissions to access one of the channels used as arguments", "app:{k}:released", `channel patterns (ACL: &pattern) do not cover "app:{k}:released"`},
		{"7.2 channel", "NOPERM No permissions to access a channel", "app:{k}:released", `"app:{k}:released"`},
		{"7.0 command in a script", in("ERR The user executing the script can't run this command or subcommand script: %s, on @user_script:%d.", spublish), "", "may not run SPUBLISH"},
		{"7.2 command in a script", in("NOPERM User turnstile has no permissions to run the 'spublish' command script: %s, on @user_script:%d.", spublish), "", "may not run SPUBLISH"},
		{"7.0 key in a script", in("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: %s, on @user_script:%d.", del), "", `do not cover "app:{k}": `},
		{"7.2 key in a script", in("NOPERM No permissions to access a key script: %s, on @user_script:%d.", del), "", `do not cover "app:{k}": `},
		{"7.0 channel in a script", in("ERR The user executing the script can't publish to the channel mentioned in the command script: %s, on @user_script:%d.", spublish), "", `do not cover "app:{k}:released"`},
		{"7.2 channel in a script", in("NOPERM No permissions to access a channel script: %s, on @user_script:%d.", spublish), "", `"app:{k}:released"`},
		{"line out of range", "ERR The user executing the script can't run this command or subcommand script: 0123abcd, on @user_script:9999.", "", "may not do what turnstile asked"},
		{"wrong password", "WRONGPASS invalid username-password pair or user is disabled.", "", "authentication failed"},
		{"no auth", "NOAUTH Authentication required.", "", "authentication failed"},
		{"other reply", "ERR unknown command 'ssubscribe'", "", ""},
		{"busy", "BUSY Redis is busy running a script.", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := replyErr(tt.reply)
			err := storeError(raw, src, c, tt.channel)
			if tt.want == "" {
				if err != error(raw) {
					t.Fatalf("storeError changed %q into %v", tt.reply, err)
				}
				return
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("storeError(%q) = %v, want it to say %q", tt.reply, err, tt.want)
			}
			if !strings.HasSuffix(err.Error(), tt.reply) {
				t.Errorf("storeError(%q) = %v: the server's reply is not kept", tt.reply, err)
			}
			auth := strings.Contains(tt.want, "authentication")
			if errors.Is(err, turnstile.ErrPermission) == auth {
				t.Errorf("errors.Is(%v, ErrPermission) = %v", err, !auth)
			}
			if !errors.Is(err, raw) {
				t.Errorf("%v does not wrap the reply", err)
			}
			if again := storeError(err, src, c, tt.channel); again != err {
				t.Errorf("classified twice: %v", again)
			}
		})
	}
	for _, err := range []error{nil, context.Canceled, fmt.Errorf("dial tcp: connection refused")} {
		if got := storeError(err, src, c, ""); got != err {
			t.Errorf("storeError(%v) = %v, want it unchanged", err, got)
		}
	}
}

// FuzzStoreError: whatever a server replies, to whatever call, storeError
// neither panics nor loses the reply, and it classifies as a permission
// refusal exactly the replies that are one.
func FuzzStoreError(f *testing.F) {
	f.Add("NOPERM this user has no permissions to run the 'evalsha' command", "app:{k}", "app:{k}:released", "", 0)
	f.Add("ERR The user executing the script can't run this command or subcommand script: ab, on @user_script:31.", "app:{k}", "x", "", int(releaseScript))
	f.Add("ERR The user executing the script can't publish to the channel mentioned in the command script: ab, on @user_script:31.", "k", "app:{k}:released", "", int(releaseScript))
	f.Add("NOPERM No permissions to access a key script: ab, on @user_script:0.", "", "", "c", int(acquireScript))
	f.Add("WRONGPASS invalid username-password pair", "k", "a", "", -1)
	f.Add("ERR The user executing the script can't access KEYS[99999999999999999999]", "k", "a", "", 1)
	f.Fuzz(func(t *testing.T, reply, key, arg, channel string, script int) {
		src := ""
		if script >= 0 && script < int(numScripts) {
			src = sources[script]
		}
		raw := replyErr(reply)
		err := storeError(raw, src, call{keys: []string{key}, args: []string{arg}}, channel)
		if !errors.Is(err, raw) {
			t.Fatalf("the reply is lost: %v", err)
		}
		perm := strings.HasPrefix(reply, "NOPERM") || strings.Contains(reply, "The user executing the script can't")
		auth := strings.HasPrefix(reply, "WRONGPASS") || strings.HasPrefix(reply, "NOAUTH")
		if errors.Is(err, turnstile.ErrPermission) != (perm && !auth) {
			t.Fatalf("ErrPermission = %v for %q", !perm, reply)
		}
		if !strings.Contains(err.Error(), reply) {
			t.Fatalf("%v does not say the reply %q", err, reply)
		}
	})
}
