package devserver

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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

// DefaultMemoryLimit is the soft memory limit serve keeps when GOMEMLIMIT
// sets none, raised to twice the live heap when that is more: 5x a live
// heap of tens of MiB (a queue backlog's index) would otherwise take
// hundreds of MiB, and a fixed limit under the live heap would make the
// collector run without pause.
const DefaultMemoryLimit = 192 << 20

// TuneGC sets the collector's target to DefaultGCPercent unless gogc (the
// GOGC environment variable's value) is set, and keeps the soft memory
// limit at DefaultMemoryLimit or twice the live heap unless gomemlimit
// (GOMEMLIMIT's) is set; the runtime already applied what is set. It
// returns a description of what is in force, for the start banner. It
// changes process-wide state: only main-like callers (the serve command,
// benchserve) call it, once.
func TuneGC(gogc, gomemlimit string) string {
	var desc string
	if gogc != "" {
		desc = fmt.Sprintf("GOGC=%s (from the environment)", gogc)
	} else {
		debug.SetGCPercent(DefaultGCPercent)
		desc = fmt.Sprintf("GOGC=%d (serve's default; set GOGC to choose another)", DefaultGCPercent)
	}
	if gomemlimit != "" {
		return desc + fmt.Sprintf(", GOMEMLIMIT=%s (from the environment)", gomemlimit)
	}
	limitTuner{}.tune()
	return desc + fmt.Sprintf(", memory limit %d MiB or twice the live heap (serve's default; set GOMEMLIMIT to choose another)", DefaultMemoryLimit>>20)
}

// limitTuner sets the memory limit after each collection, from the live
// heap it left: a finalizer on a new object runs once the next collection
// found it unreachable, so an idle process is not woken.
type limitTuner struct{ _ byte }

func (limitTuner) tune() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	live := int64(0)
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = int64(s[0].Value.Uint64())
	}
	debug.SetMemoryLimit(memoryLimit(live))
	runtime.SetFinalizer(&limitTuner{}, func(*limitTuner) { limitTuner{}.tune() })
}

// memoryLimit is the soft memory limit for a live heap of live bytes.
func memoryLimit(live int64) int64 { return max(DefaultMemoryLimit, 2*live) }
