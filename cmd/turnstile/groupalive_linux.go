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
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range dir {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if running, group := parseStat(stat); running && group == pgid {
			return true
		}
	}
	return false
}

// parseStat reads the state and process group from /proc/PID/stat:
// "PID (COMM) STATE PPID PGRP ...", where COMM may itself contain spaces
// and parentheses, so the fields are counted from the last ')'.
func parseStat(stat []byte) (running bool, pgrp int) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false, 0
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return false, 0
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return false, 0
	}
	state := f[0][0]
	return state != 'Z' && state != 'X', pgrp
}
