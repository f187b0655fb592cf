package proc

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the server die with whoever started it, even when
// that process is killed with SIGKILL and cannot clean up. It keeps any
// other attributes already set on cmd.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
