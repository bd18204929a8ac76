//go:build !unix

package proc

import "syscall"

// sysProcAttr returns no attributes: this system has no process groups.
func sysProcAttr(*User) *syscall.SysProcAttr { return nil }

// killGroup does nothing on this system.
func killGroup(int) {}
