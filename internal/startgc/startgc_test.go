package startgc

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestBeginAndEnd: during the holiday GOGC is out of reach and the heap
// capped at MaxHeap (or a lower GOMEMLIMIT); its end puts back exactly
// what was set before, and init's holiday has ended by itself.
func TestBeginAndEnd(t *testing.T) {
	<-ended // init's holiday, so that its end does not run under the test
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 40))
	gcPercent := func() int {
		p := debug.SetGCPercent(0)
		debug.SetGCPercent(p)
		return p
	}
	end := begin()
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != math.MaxInt32 || l != MaxHeap {
		t.Errorf("during the holiday: GOGC %d, memory limit %d; want %d and %d", p, l, math.MaxInt32, MaxHeap)
	}
	end()
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != 77 || l != 1<<40 {
		t.Errorf("after the holiday: GOGC %d, memory limit %d; want 77 and %d as before", p, l, int64(1<<40))
	}
	// A lower limit set before the holiday stays in force during it.
	debug.SetMemoryLimit(MaxHeap / 2)
	end = begin()
	if l := debug.SetMemoryLimit(-1); l != MaxHeap/2 {
		t.Errorf("during a holiday under a lower limit: %d, want %d", l, MaxHeap/2)
	}
	end()
}
