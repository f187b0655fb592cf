package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// FakeTimeLib is Debian's libfaketime, the multi-threaded variant, which
// a Clock preloads into the servers it runs.
const FakeTimeLib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"

// FakeTimeInstallHint is the command that installs FakeTimeLib on Debian.
const FakeTimeInstallHint = "apt-get install -y faketime"

// ErrNoFakeTime means FakeTimeLib is missing.
var ErrNoFakeTime = errors.New(FakeTimeLib + " not found; install it with: " + FakeTimeInstallHint)

// Clock is a wrong wall clock for server processes: a server started with
// its Env runs under libfaketime and reads the real time shifted by the
// Clock's offset, which Set and Jump change while the server runs, with
// no restart. Only the wall clock (CLOCK_REALTIME, gettimeofday, time)
// is shifted; the monotonic clock stays true, as when an operator or NTP
// steps a machine's clock.
//
// libfaketime intercepts the C library's time calls, so it works on
// servers that read the clock through libc: redis-server, postgres,
// mariadbd and the JVM (ZooKeeper). It has no effect on Go programs such
// as etcd, whose runtime reads the clock through the vDSO directly.
type Clock struct {
	path string

	mu     sync.Mutex
	offset time.Duration
}

// NewClock returns a Clock with offset 0 whose offset lives in the file
// path (created or overwritten), or ErrNoFakeTime when libfaketime is
// not installed.
func NewClock(path string) (*Clock, error) {
	if _, err := os.Stat(FakeTimeLib); err != nil {
		return nil, ErrNoFakeTime
	}
	c := &Clock{path: path}
	if err := c.write(0); err != nil {
		return nil, err
	}
	return c, nil
}

// Env is the environment that puts a process under the Clock: the
// preloaded library, the file it rereads on every clock call (so that a
// change takes effect at once; it costs a server some 25 µs a clock
// call), and a true monotonic clock. The C library is preloaded after
// libfaketime: under libfaketime alone, Debian's redis-server, linked
// with jemalloc, hangs at start (libfaketime reports recursive calls of
// clock_gettime while it initialises); with the C library after it, it
// starts.
func (c *Clock) Env() []string {
	return []string{
		"LD_PRELOAD=" + FakeTimeLib + ":libc.so.6",
		"FAKETIME_TIMESTAMP_FILE=" + c.path,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
		// Without this, libfaketime turns the timed waits of programs
		// that wait on the monotonic clock, such as the JVM's sleeps,
		// into waits several times longer.
		"FAKETIME_FORCE_MONOTONIC_FIX=0",
	}
}

// Apply puts cmd under the Clock: it adds Env to cmd's environment (the
// launcher's own when cmd has none set).
func (c *Clock) Apply(cmd *exec.Cmd) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, c.Env()...)
}

// Offset is how far the Clock is ahead of the real time (behind when
// negative).
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Set makes the Clock read the real time plus offset from now on.
func (c *Clock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(offset)
}

// Jump moves the Clock by d (back when d is negative), as a step of the
// machine's clock does.
func (c *Clock) Jump(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(c.offset + d)
}

// write replaces the offset file in one rename, so that a server never
// reads a half-written offset.
func (c *Clock) write(offset time.Duration) error {
	spec := strconv.FormatFloat(offset.Seconds(), 'f', 6, 64)
	if offset >= 0 {
		spec = "+" + spec
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".faketime-*")
	if err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	_, err = tmp.WriteString(spec + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A server running as another user (postgres) must read it.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("clock: %w", err)
	}
	c.offset = offset
	return nil
}
