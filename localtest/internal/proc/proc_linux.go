package proc

import "syscall"

// setParentDeathSignal asks Linux to kill the server when the process that
// started it dies without stopping it (a test binary killed by -timeout),
// so that no server is left behind. Go sets it after switching to the
// Credential, so it holds for servers run as another user too.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}
