package serve

import (
	"fmt"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector's target that `dispatch serve`
// sets when the GOGC environment variable sets none: the heap may grow to
// 5x the live heap between collections instead of the runtime's 2x.
//
// Why: serve's live heap is a few MiB (caches, in-flight requests) while
// the pipeline allocates about 45 KB per command, so at the runtime's
// default the collector ran well over a hundred times a second under load.
// Measured with bench-serve (in memory, 4 clients, interleaved runs):
// 16 k -> 26 k commands/s and 110 -> 70 µs of CPU per command at 400;
// 800 gained nothing more within the noise. The heap target stays tens of
// MiB. docs/store/embedded.md has the figures.
const DefaultGCPercent = 400

// TuneGC sets the collector's target to DefaultGCPercent unless gogc (the
// GOGC environment variable's value) is set, in which case the runtime
// already applied it. It returns a description of the target in force,
// for the start banner. It changes process-wide state: only main-like
// callers (the serve command, benchserve) call it.
func TuneGC(gogc string) string {
	if gogc != "" {
		return fmt.Sprintf("GOGC=%s (from the environment)", gogc)
	}
	debug.SetGCPercent(DefaultGCPercent)
	return fmt.Sprintf("GOGC=%d (serve's default; set GOGC to choose another)", DefaultGCPercent)
}
