package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// crash kills a member's process and every process it started with
// SIGKILL, as a machine failure does, leaving its files in place (a
// launcher's own Kill may remove them), and waits until they are gone.
func crash(m *member) error {
	pid := m.ctl.PID()
	if pid == 0 {
		return errors.New(m.name + " is not running")
	}
	pids := append([]int{pid}, descendants(pid)...)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: process %d outlived SIGKILL by 10 s", m.name, p)
			}
			time.Sleep(5 * time.Millisecond)
		}
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

// descendants are the processes below pid, read from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(stat), ") ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
