package devserver

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	if got := TuneGC("150", "1GiB"); got != "GOGC=150 (from the environment), GOMEMLIMIT=1GiB (from the environment)" {
		t.Fatalf("with GOGC and GOMEMLIMIT set: %q", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("with GOGC set the target changed to %d; the environment's must stand", now)
	}
	if now := debug.SetMemoryLimit(-1); now != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set the limit changed to %d; the environment's must stand", now)
	}
	if got := TuneGC("", ""); got != "GOGC=400 (serve's default; set GOGC to choose another), memory limit 192 MiB or twice the live heap (serve's default; set GOMEMLIMIT to choose another)" {
		t.Fatalf("without GOGC: %q", got)
	}
	if now := debug.SetGCPercent(100); now != DefaultGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", now, DefaultGCPercent)
	}
	if now := debug.SetMemoryLimit(-1); now < DefaultMemoryLimit {
		t.Fatalf("without GOMEMLIMIT the limit is %d, want at least %d", now, DefaultMemoryLimit)
	}
}

func TestMemoryLimitFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct{ live, want int64 }{
		{0, DefaultMemoryLimit},
		{50 << 20, DefaultMemoryLimit},
		{DefaultMemoryLimit / 2, DefaultMemoryLimit},
		{600 << 20, 1200 << 20},
	} {
		if got := memoryLimit(c.live); got != c.want {
			t.Errorf("memoryLimit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
