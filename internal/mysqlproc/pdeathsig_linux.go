package mysqlproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with whoever started it, even when
// that process is killed with SIGKILL and cannot clean up.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
