//go:build !linux

package server

// readProcess reports no process metrics: they come from /proc, which
// only Linux has.
func readProcess() processStats { return processStats{} }
