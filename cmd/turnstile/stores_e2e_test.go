//go:build unix

package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// These tests run the built binary against every store it is built with:
// real etcd, ZooKeeper, PostgreSQL, MariaDB and Redis servers.

// holdScript is a command that writes its fencing token to $DIR/held and
// waits until $DIR/go exists.
const holdScript = `echo "$TURNSTILE_TOKEN" > "$DIR/held.tmp" && mv "$DIR/held.tmp" "$DIR/held"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done`

// readToken reads the token a command wrote to path.
func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("token %q in %s: want a positive number (%v)", b, filepath.Base(path), err)
	}
	return tok
}

// startHolder starts a turnstile run that holds key on the store at
// backend with --ttl ttl and holdScript, and waits until it holds. env is
// its environment, $DIR in it dir, where the script works.
func startHolder(t *testing.T, backend, key, ttl string) (holder *proc, dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	env = []string{"TURNSTILE_BACKEND=" + backend, "DIR=" + dir}
	holder = startTurnstile(t, env, "run", "--key", key, "--ttl", ttl, "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)
	return holder, dir, env
}

// checkRunsUnderLock runs a command under a lock on the store at
// backend: while it holds the lock another run cannot take it, and the
// next holder's token is greater.
func checkRunsUnderLock(t *testing.T, backend string) {
	const key = "lock:cli:store"
	holder, dir, env := startHolder(t, backend, key, "5s")
	first := readToken(t, filepath.Join(dir, "held"))

	if r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "true"); r.code != exitNotAcquired {
		t.Errorf("a second run while the lock is held: exit code %d, want %d; stderr:\n%s", r.code, exitNotAcquired, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("holder: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	r := runTurnstile(t, env, "run", "--key", key, "--no-wait", "--", "sh", "-c", `echo "token=$TURNSTILE_TOKEN"`)
	if r.code != 0 {
		t.Fatalf("run after the holder released: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	second, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(r.stdout, "token=")), 10, 64)
	if err != nil || second <= first {
		t.Fatalf("the next holder's token %q is not greater than %d", r.stdout, first)
	}
}

// checkKilledHolderFreesWithinTTL SIGKILLs a turnstile holding a lock
// with --ttl 3s and checks that the next run gets the lock within the
// TTL and the store's granularity — well before the 30 s of a ZooKeeper
// session that ignored the TTL — and not at once (the lock did outlive
// its crashed holder for a while).
func checkKilledHolderFreesWithinTTL(t *testing.T, backend string) {
	const key = "lock:cli:killed"
	holder, _, env := startHolder(t, backend, key, "3s")
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	holder.wait(t, 10*time.Second)

	next := startTurnstile(t, env, "run", "--key", key, "--ttl", "3s", "--wait", "45s", "--", "true")
	r := next.wait(t, time.Minute)
	took := time.Since(killed)
	if r.code != 0 {
		t.Fatalf("next run: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	// The TTL, the store's rounding (etcd: whole seconds; ZooKeeper: a
	// tick) and a generous allowance for a busy machine, which must stay
	// clearly below a 30 s session.
	const bound = 15 * time.Second
	if took > bound {
		t.Fatalf("the lock of a holder killed with --ttl 3s was taken %v after the kill, want within %v", took.Round(time.Millisecond), bound)
	}
	if took < time.Second {
		t.Fatalf("the lock was taken %v after its holder was killed: it should have lasted about its TTL", took.Round(time.Millisecond))
	}
	t.Logf("taken %v after the holder was killed (--ttl 3s)", took.Round(time.Millisecond))
}

func TestRunEtcd(t *testing.T) {
	srv := testserver.StartEtcd(t)
	t.Run("runs under the lock", func(t *testing.T) { checkRunsUnderLock(t, srv.URL()) })
	t.Run("killed holder", func(t *testing.T) { checkKilledHolderFreesWithinTTL(t, srv.URL()) })
	t.Run("fair", func(t *testing.T) { checkFairOrder(t, srv.URL()) })
}

func TestRunZooKeeper(t *testing.T) {
	srv := testserver.StartZooKeeper(t)
	u := "zookeeper://" + srv.Addr()
	t.Run("runs under the lock", func(t *testing.T) { checkRunsUnderLock(t, u) })
	t.Run("killed holder", func(t *testing.T) { checkKilledHolderFreesWithinTTL(t, u) })
	t.Run("fair", func(t *testing.T) { checkFairOrder(t, u) })
	t.Run("ttl over session_timeout", func(t *testing.T) {
		r := runTurnstile(t, nil, "run", "--backend", u+"?session_timeout=2s", "--ttl", "3s", "--key", "k", "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "session_timeout=2s") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 1 {
			t.Fatalf("--ttl 3s over session_timeout=2s: exit code %d, want %d with one line and the usage hint; stderr:\n%s", r.code, exitUsage, r.stderr)
		}
	})
}

func TestRunPostgres(t *testing.T) {
	srv := testserver.StartPostgres(t)
	checkRunsUnderLock(t, srv.URL())
}

func TestRunMySQL(t *testing.T) {
	srv := testserver.StartMySQL(t)
	checkRunsUnderLock(t, srv.URL())
}

// TestRunFallback: the Redis→PostgreSQL fallback as a URL, with the inner
// URLs percent-encoded.
func TestRunFallback(t *testing.T) {
	rs := testserver.StartRedis(t)
	pg := testserver.StartPostgres(t)
	checkRunsUnderLock(t, "fallback://?primary="+url.QueryEscape(rs.URL())+"&secondary="+url.QueryEscape(pg.URL()))
}
