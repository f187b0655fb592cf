//go:build unix

package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// signalTree sends sig to pid and its descendants. A descendant that has
// exited meanwhile is no error.
func signalTree(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return ErrNotRunning
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	for _, child := range descendants(pid) {
		_ = syscall.Kill(child, sig)
	}
	return nil
}

// resumeDescendants continues the processes below pid with SIGCONT.
func resumeDescendants(pid int) {
	for _, child := range descendants(pid) {
		_ = syscall.Kill(child, sigCont)
	}
}

// KillTree kills the process pid and every process below it with SIGKILL,
// as a machine failure does. The processes below it are listed before
// any is killed, since a child whose parent has died is no longer found
// below it. A descendant that has exited meanwhile is no error.
func KillTree(pid int) error {
	if pid <= 0 {
		return ErrNotRunning
	}
	children := descendants(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	return nil
}

// descendants lists the processes below pid, read from /proc (none where
// there is no /proc).
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
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so the fields are counted from the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
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
