package main

import (
	"os"
	"syscall"
)

// stopWithParent asks Linux to send this process SIGTERM when its parent
// exits. `make run` starts it through `go run`, which neither passes
// signals on nor stops its child when it is killed itself; with this, the
// stack still shuts down cleanly instead of running on, orphaned.
func stopWithParent() {
	ppid := os.Getppid()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if os.Getppid() != ppid { // the parent was already gone
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
