package wire

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every millisecond count prints as its shortest decimal.
func TestSecondsMS(t *testing.T) {
	for ms := int64(0); ms < 200_000; ms += 7 {
		d := time.Duration(ms)*time.Millisecond + 400*time.Microsecond
		got := strconv.FormatFloat(SecondsMS(d), 'f', -1, 64)
		want := strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
		if _, frac, _ := strings.Cut(got, "."); got != want || len(frac) > 3 {
			t.Fatalf("SecondsMS(%v) prints %s, want %s", d, got, want)
		}
	}
	if got := SecondsMS(1128 * time.Millisecond); got != 1.128 {
		t.Errorf("1.128 s: %v", got)
	}
}
