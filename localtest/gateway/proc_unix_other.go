//go:build unix && !linux

package gateway

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// childPIDs returns nil: without /proc the children are not listed, and
// the emulator is relied on to stop its runtime when it is terminated.
func childPIDs(int) []int { return nil }
