package main

import (
	"strings"
	"testing"
	"time"
)

// The verdict follows the store under test: the pipeline's 0.5x goal in
// memory, a floor of its own for each file mode.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ratio     float64
		ephemeral bool
		syncEvery time.Duration
		want      string
	}{
		{"memory at the goal", 0.50, true, 0, "goal >= 0.50x, the pipeline's own cost, judged in memory: met"},
		{"memory under the goal", 0.49, true, 0, "judged in memory: MISSED"},
		{"always over its floor", 0.31, false, 0, "--fsync always: floor >= 0.25x: met"},
		{"always under its floor", 0.24, false, 0, "--fsync always: floor >= 0.25x: MISSED"},
		{"interval over its floor", 0.44, false, 100 * time.Millisecond, "--fsync 100ms: floor >= 0.35x: met"},
		{"interval under its floor", 0.34, false, 100 * time.Millisecond, "--fsync 100ms: floor >= 0.35x: MISSED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(tc.ratio, tc.ephemeral, tc.syncEvery)
			if !strings.Contains(got, tc.want) {
				t.Errorf("judge(%.2f, %v, %v) = %q, want it to say %q", tc.ratio, tc.ephemeral, tc.syncEvery, got, tc.want)
			}
		})
	}
}

// SigV4 verification may cost at most 10% of the open ingress's rate.
func TestJudgeAuth(t *testing.T) {
	for ratio, want := range map[float64]string{0.95: "goal >= 0.90x: met", 0.90: "goal >= 0.90x: met", 0.89: "goal >= 0.90x: MISSED"} {
		if got := judgeAuth(ratio); got != want {
			t.Errorf("judgeAuth(%.2f) = %q, want %q", ratio, got, want)
		}
	}
}
