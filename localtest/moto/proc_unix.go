//go:build unix

package moto

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a new process group, so that
// signalGroup reaches everything it starts.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends SIGTERM, or SIGKILL if kill is set, to the process
// group led by p.
func signalGroup(p *os.Process, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return syscall.Kill(-p.Pid, sig)
}
