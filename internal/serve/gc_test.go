package serve

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	if got := TuneGC("150"); got != "GOGC=150 (from the environment)" {
		t.Fatalf("with GOGC set: %q", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("with GOGC set the target changed to %d; the environment's must stand", now)
	}
	if got := TuneGC(""); got != "GOGC=400 (serve's default; set GOGC to choose another)" {
		t.Fatalf("without GOGC: %q", got)
	}
	if now := debug.SetGCPercent(100); now != DefaultGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", now, DefaultGCPercent)
	}
}
