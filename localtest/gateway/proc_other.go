//go:build !unix

package gateway

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing on this system.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the process pid; this system has no process groups.
func signalGroup(pid int, _ bool) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// childPIDs returns nil on this system.
func childPIDs(int) []int { return nil }
