// Package startgc keeps the garbage collector from starting cycles while
// the CLI's packages initialize and for the first moments of main, so
// that a short command (`snavio version`, `config list`) does not pay for
// collections. Linked libraries allocate about 4 MB at package init (the
// AWS SDK's schema and endpoint tables, tablewriter's width cache), which
// crosses the collector's 4 MB starting goal (docs/startup.md, "The
// start-up GC holiday").
//
// Import it for its side effect from the package the CLI's main imports.
package startgc

import (
	"math"
	"runtime/debug"
	"time"
)

const (
	// Holiday is how long after package init the collector starts no
	// cycle; then GOGC and GOMEMLIMIT (the environment's, or the
	// defaults) apply again.
	Holiday = 100 * time.Millisecond
	// MaxHeap bounds the heap during the holiday: past it the collector
	// runs as under a memory limit, so a command that allocates much at
	// once is not left without one.
	MaxHeap = 64 << 20
)

// ended is closed once the holiday that init began has ended.
var ended = make(chan struct{})

func init() {
	end := begin()
	time.AfterFunc(Holiday, func() {
		end()
		close(ended)
	})
}

// begin raises GOGC out of reach and caps the heap at MaxHeap, and
// returns what puts both back. Not GOGC=off: SetGCPercent(-1) waits for
// a cycle in progress, and the libraries initialized before this package
// may have started one.
func begin() (end func()) {
	percent := debug.SetGCPercent(math.MaxInt32)
	limit := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(limit, MaxHeap))
	return func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(percent)
	}
}
