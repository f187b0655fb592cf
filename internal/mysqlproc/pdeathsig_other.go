//go:build !linux

package mysqlproc

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: there the server
// is stopped by Kill only.
func dieWithParent(*exec.Cmd) {}
