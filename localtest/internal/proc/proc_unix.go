//go:build unix

package proc

import "syscall"

// sysProcAttr returns attributes that put the process in its own group, as
// as when as is not nil, dying with its parent where the system can.
func sysProcAttr(as *User) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		// No supplementary groups: root's must not follow the server.
		a.Credential = &syscall.Credential{Uid: as.Uid, Gid: as.Gid}
	}
	setParentDeathSignal(a)
	return a
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
