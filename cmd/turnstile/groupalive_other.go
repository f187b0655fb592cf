//go:build unix && !linux

package main

import (
	"errors"
	"syscall"
)

// groupAlive reports whether any process of the group still exists.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
