package gateway

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// setParentDeathSignal asks Linux to kill the emulator when the process
// that started it dies without closing the pool (a test binary killed by
// -timeout, say). Its runtime then loses the Runtime API and exits too.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}

// childPIDs returns the ids of the processes whose parent is pid, read from
// /proc. The emulator starts each bootstrap in a process group of its own,
// so signalling the emulator's group does not reach it.
func childPIDs(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(string(fields[1])); ppid != pid {
			continue
		}
		if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			kids = append(kids, kid)
		}
	}
	return kids
}
