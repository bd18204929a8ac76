package moto

import "syscall"

// setParentDeathSignal asks Linux to kill moto_server when the process that
// started it dies without stopping it (a test binary killed by -timeout, for
// example), so that no server is left behind.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}
