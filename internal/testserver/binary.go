package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is a Go command that a package's tests run as processes of
// their own: it is built once, when a test first asks for it, into a
// temporary directory that Main makes before the tests and removes
// after them (see Shared).
type Binary struct {
	pkg  string
	dir  string
	once sync.Once
	path string
	err  error
}

// NewBinary is the command of the Go package pkg, an import path such as
// "github.com/turnstilelock/turnstile/cmd/turnstile".
func NewBinary(pkg string) *Binary { return &Binary{pkg: pkg} }

// Shared is the MainOption that makes the directory b is built into
// before the tests, and removes it after them.
func (b *Binary) Shared() MainOption {
	return Shared(func() (func(), error) {
		dir, err := os.MkdirTemp("", "turnstile-bin-")
		b.dir = dir
		return func() { _ = os.RemoveAll(dir) }, err
	})
}

// Path is the built command's file: the first call builds it with go
// build, and a failed build fails the test (this one and every later
// one that asks).
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir == "" {
			b.err = errors.New("testserver: " + b.pkg + " is not built: Main was not given its Shared option")
			return
		}
		b.path = filepath.Join(b.dir, filepath.Base(b.pkg))
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// StopCommand stops cmd, a process a test started, with SIGTERM, unless
// it has exited already (exited is closed once it has), and waits until
// it has exited; if it has not 20 s later, it kills it and fails the
// test with what output says the process wrote.
func StopCommand(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}, output func() string) {
	t.Helper()
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("%s did not stop within 20s of SIGTERM\n%s", commandName(cmd), output())
	}
}

// commandName is cmd's program and its first argument (a subcommand,
// say): "turnstile serve".
func commandName(cmd *exec.Cmd) string {
	name := filepath.Base(cmd.Path)
	if len(cmd.Args) > 1 {
		name += " " + cmd.Args[1]
	}
	return name
}
