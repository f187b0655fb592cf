package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// groupAlive reports whether a process of the group is still running.
// Zombies do not count: where PID 1 does not reap orphans (many
// containers), a grandchild that already died would otherwise look alive
// until the grace period ends.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	procs, err := listProcs()
	if err != nil {
		return true
	}
	for _, p := range procs {
		if p.running && p.pgrp == pgid {
			return true
		}
	}
	return false
}

// descendantsAlive reports whether a process descended from root still
// runs. Without /proc it cannot tell, and says no.
func descendantsAlive(root int) bool {
	procs, err := listProcs()
	if err != nil {
		return false
	}
	for _, p := range descendants(procs, root) {
		if p.running {
			return true
		}
	}
	return false
}

// descendants returns the processes of procs descended from root, root
// excluded.
func descendants(procs []procInfo, root int) []procInfo {
	children := make(map[int][]procInfo)
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		out = append(out, p)
		queue = append(queue, children[p.pid]...)
	}
	return out
}

// procInfo is what turnstile reads from /proc/PID/stat.
type procInfo struct {
	pid, ppid, pgrp int
	running         bool // neither a zombie nor dead
}

// listProcs reads every process of the system from /proc.
func listProcs() ([]procInfo, error) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	procs := make([]procInfo, 0, len(dir))
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		p, ok := readStat(stat)
		if !ok {
			continue
		}
		p.pid = pid
		procs = append(procs, p)
	}
	return procs, nil
}

// parseStat reads the state and process group from /proc/PID/stat.
func parseStat(stat []byte) (running bool, pgrp int) {
	p, ok := readStat(stat)
	if !ok {
		return false, 0
	}
	return p.running, p.pgrp
}

// readStat reads the state, parent and process group from /proc/PID/stat:
// "PID (COMM) STATE PPID PGRP ...", where COMM may itself contain spaces
// and parentheses, so the fields are counted from the last ')'.
func readStat(stat []byte) (p procInfo, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return p, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return p, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return p, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return p, false
	}
	state := f[0][0]
	return procInfo{ppid: ppid, pgrp: pgrp, running: state != 'Z' && state != 'X'}, true
}
