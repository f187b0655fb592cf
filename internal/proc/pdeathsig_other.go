//go:build !linux

package proc

import "os/exec"

// DieWithParent has no portable equivalent outside Linux: there the server
// is stopped by its launcher's Kill only.
func DieWithParent(*exec.Cmd) {}
