package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// If turnstile dies by a signal it cannot catch, nothing renews the lease
// any more: every process of the command — in its group or escaped from
// it, ignoring SIGTERM or stopped — must be gone before the lease can
// expire and a second holder start.
func TestRunCommandGroupDiesWithTurnstile(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	tests := []struct {
		name string
		// script runs in the command's shell, which ignores SIGTERM; it
		// writes the PID of every process it starts in the background to
		// a file in $DIR/bg.
		script string
		// stopSupervisor SIGSTOPs turnstile's supervisor before turnstile
		// is killed.
		stopSupervisor bool
	}{
		{name: "ignores SIGTERM", script: `sleep 300 & echo $! > "$DIR/bg/a"`},
		// Ignoring SIGHUP (as under nohup), since the kernel sends SIGHUP
		// and SIGCONT to a group with stopped members once it is orphaned.
		{name: "stopped grandchild", script: `trap '' HUP; sleep 300 & echo $! > "$DIR/bg/a"; kill -STOP $!`},
		{name: "escaped with setsid", script: `setsid sh -c 'echo $$ > "$DIR/bg/a"; exec sleep 300' &
while [ ! -s "$DIR/bg/a" ]; do sleep 0.01; done`},
		{name: "double fork", script: `( sleep 300 & echo $! > "$DIR/bg/a" ) &
while [ ! -s "$DIR/bg/a" ]; do sleep 0.01; done`},
		{name: "supervisor stopped", script: `sleep 300 & echo $! > "$DIR/bg/a"`, stopSupervisor: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "bg"), 0o755); err != nil {
				t.Fatal(err)
			}
			key := "lock:test:dies-with:" + strconv.Itoa(i)
			env := []string{"TURNSTILE_BACKEND=" + srv.URL(), "DIR=" + dir}
			const ttl = 4 * time.Second
			p := startTurnstile(t, env, "run", "--key", key, "--ttl", ttl.String(), "--",
				"sh", "-c", `trap '' TERM
`+tt.script+`
echo $$ > "$DIR/pgid"
touch "$DIR/ready"
sleep 300
wait`)
			waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
			pgid := readPID(t, filepath.Join(dir, "pgid"))
			var bg []int
			files, _ := filepath.Glob(filepath.Join(dir, "bg", "*"))
			for _, f := range files {
				bg = append(bg, readPID(t, f))
			}
			// Whatever happens, leave nothing behind.
			t.Cleanup(func() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				for _, pid := range bg {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if !groupAlive(pgid) || len(bg) == 0 || processGone(bg[0]) {
				t.Fatalf("the command's processes are not running before turnstile is killed (group %d, background %v)", pgid, bg)
			}
			if tt.stopSupervisor {
				sup := supervisorOf(t, p.cmd.Process.Pid)
				if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGKILL) })
			}

			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			p.wait(t, 10*time.Second)
			for groupAlive(pgid) || !allGone(bg) {
				if time.Since(killed) > ttl/2 {
					t.Fatalf("%v after turnstile was killed, the command's processes still run (group %d alive: %v; background %v gone: %v); the lease expires after %v",
						time.Since(killed).Round(time.Millisecond), pgid, groupAlive(pgid), bg, allGone(bg), ttl)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("the command's processes were gone %v after turnstile was killed", time.Since(killed).Round(time.Millisecond))

			// A second holder gets the lock once the dead holder's lease
			// expires; its command checks that no process of the first one
			// is still running at that moment.
			check := `for pid in $BG; do [ -d /proc/$pid ] && [ "$(cut -d' ' -f3 /proc/$pid/stat)" != Z ] && exit 1; done
cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$PGID" '$5 == g && $3 != "Z" { n++ } END { exit n > 0 }'`
			env2 := append(env, "PGID="+strconv.Itoa(pgid), "BG="+joinPIDs(bg))
			deadline := killed.Add(ttl + 10*time.Second)
			for {
				r := runTurnstile(t, env2, "run", "--key", key, "--no-wait", "--", "sh", "-c", check)
				if r.code == exitNotAcquired {
					if time.Now().After(deadline) {
						t.Fatalf("the lock was still held %v after its holder was killed (TTL %v)", time.Since(killed), ttl)
					}
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if r.code != 0 {
					t.Fatalf("second holder: exit code %d, want 0: a process of the first holder's command still ran beside it; stderr:\n%s", r.code, r.stderr)
				}
				break
			}
		})
	}
}

// joinPIDs is pids separated by spaces.
func joinPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, pid := range pids {
		s[i] = strconv.Itoa(pid)
	}
	return strings.Join(s, " ")
}

// allGone reports whether every process of pids has ended.
func allGone(pids []int) bool {
	for _, pid := range pids {
		if !processGone(pid) {
			return false
		}
	}
	return true
}

// supervisorOf finds the supervisor turnstile process parent started.
func supervisorOf(t *testing.T, parent int) int {
	t.Helper()
	procs, err := listProcs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.ppid != parent {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == supervisorArg {
			return p.pid
		}
	}
	t.Fatalf("turnstile %d has no supervisor", parent)
	return 0
}

// SIGQUIT is passed on to the command like SIGTERM; turnstile does not die
// of it printing its goroutines over the command's output.
func TestRunPassesSIGQUIT(t *testing.T) {
	t.Parallel()
	srv, dir, env := redisDir(t)
	const key = "lock:test:sigquit"

	holder := startTurnstile(t, env, "run", "--key", key, "--",
		"sh", "-c", `trap 'echo quit > "$DIR/quit"; exit 4' QUIT; sleep 30 & touch "$DIR/ready"; wait`)
	waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)

	before := clientCount(t, srv)
	waiter := startTurnstile(t, env, "run", "--key", key, "--", "touch", filepath.Join(dir, "ran"))
	// Once it connects to the store, turnstile handles the signal (a
	// program still starting up would die of it).
	for deadline := time.Now().Add(20 * time.Second); clientCount(t, srv) <= before; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not connect to the store within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if err := waiter.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	r := waiter.wait(t, 10*time.Second)
	if r.code != 128+int(syscall.SIGQUIT) {
		t.Errorf("waiter: exit code %d, want %d; stderr:\n%s", r.code, 128+int(syscall.SIGQUIT), r.stderr)
	}
	if !strings.Contains(r.stderr, "received SIGQUIT while waiting") {
		t.Errorf("waiter: stderr does not say why:\n%s", r.stderr)
	}
	assertNoDump(t, "waiter", r)

	if err := holder.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	r = holder.wait(t, 10*time.Second)
	if r.code != 4 {
		t.Errorf("holder: exit code %d, want the command's 4; stderr:\n%s", r.code, r.stderr)
	}
	if !exists(filepath.Join(dir, "quit")) {
		t.Error("SIGQUIT was not passed on to the command")
	}
	assertNoDump(t, "holder", r)
	if exists(filepath.Join(dir, "ran")) {
		t.Error("the waiter's command ran")
	}
}

func assertNoDump(t *testing.T, who string, r result) {
	t.Helper()
	for _, s := range []string{"SIGQUIT: quit", "goroutine "} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("%s printed a Go runtime dump (%q):\n%s", who, s, r.stderr)
			return
		}
	}
}

// The supervisor mode is not a command: typed by hand it explains itself.
func TestSupervisorModeByHand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{supervisorArg}, {supervisorArg, "foreground", "--", "true"}} {
		r := runTurnstile(t, nil, args...)
		if r.code != exitUsage {
			t.Errorf("turnstile %q: exit code %d, want %d", args, r.code, exitUsage)
		}
		if !strings.Contains(r.stderr, `started by "turnstile run" itself`) {
			t.Errorf("turnstile %q: stderr does not explain:\n%s", args, r.stderr)
		}
	}
}
