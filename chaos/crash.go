package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// crash kills a member's process and every process it started with
// SIGKILL, as a machine failure does, leaving its files in place (a
// launcher's own Kill may remove them), and waits until it is gone.
func crash(m *member) error {
	pid := m.ctl.PID()
	if pid == 0 {
		return errors.New(m.name + " is not running")
	}
	if err := proc.KillTree(pid); err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: process %d outlived SIGKILL by 10 s", m.name, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its parent to reap it counts as exited).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	return ok && !strings.HasPrefix(rest, "Z")
}
