//go:build !unix

package embedded

import "time"

// cpuTime is not measured here: the cpu-ns/op metric is left out.
func cpuTime() time.Duration { return 0 }
