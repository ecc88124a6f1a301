//go:build linux

package server

import (
	"os"
	"syscall"
)

// readProcess reads the process's CPU time, memory, start time and file
// descriptors from /proc, as Prometheus's process collector does.
func readProcess() processStats {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return processStats{}
	}
	st, err := parseProcStat(data)
	if err != nil {
		return processStats{}
	}
	var boot int64
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		boot, _ = parseBootTime(b)
	}
	ps := processFromStat(st, boot, os.Getpagesize())
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		ps.openFDs = len(fds)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		ps.maxFDs = float64(rl.Cur)
	}
	return ps
}
