//go:build !unix

package moto

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing on this system.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills p; this system has no process groups to signal.
func signalGroup(p *os.Process, _ bool) error {
	return p.Kill()
}
