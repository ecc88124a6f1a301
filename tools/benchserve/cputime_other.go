//go:build !unix

package main

import "time"

// cpuTime is not measured here: the CPU per command is printed as n/a.
func cpuTime() time.Duration { return 0 }
