package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { control.Close() })
	fd := int(control.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	return control, term
}

// A command that reads the terminal must get it, as under a shell; in a
// background process group it would be stopped by SIGTTIN for good.
func TestRunGivesCommandTheTerminal(t *testing.T) {
	t.Parallel()
	control, term := openPTY(t)

	cmd := exec.Command(binary, "run", "--backend", "mem://", "--key", "k", "--",
		"sh", "-c", `read line; echo "got:$line"; exit 3`)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term, term, term
	// turnstile leads a new session whose controlling terminal is term, so
	// it is in the terminal's foreground group, as when typed at a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term.Close()
	output := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(control) // ends with EIO once every holder of term closed it
		output <- b
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if _, err := control.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}

	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("turnstile still running after 10s: the command was probably stopped reading the terminal (SIGTTIN)")
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want the command's 3", code)
	}
	select {
	case b := <-output:
		if !bytes.Contains(b, []byte("got:hello")) {
			t.Errorf("the command did not read the terminal; terminal shows %q", b)
		}
	case <-time.After(5 * time.Second):
		t.Error("terminal output did not end after turnstile exited")
	}
}
