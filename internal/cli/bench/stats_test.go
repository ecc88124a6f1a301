package bench

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("p%g of 1..100ms = %v, want %v", tc.p, got, tc.want)
		}
	}
	ten := d[:10]
	if got := Percentile(ten, 99); got != 10*time.Millisecond {
		t.Errorf("p99 of 10 values = %v, want the largest", got)
	}
	if got := Percentile(ten, 50); got != 5*time.Millisecond {
		t.Errorf("p50 of 1..10ms = %v, want 5ms", got)
	}
	if got := Percentile(d[:1], 50); got != time.Millisecond {
		t.Errorf("p50 of one value = %v", got)
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("p99 of none = %v", got)
	}
}

func TestLatenciesSummary(t *testing.T) {
	var l Latencies
	if got := l.Summary(); got != (Latency{}) {
		t.Fatalf("empty summary = %+v", got)
	}
	// Added out of order, with sub-microsecond noise that must not show.
	for _, d := range []time.Duration{3*time.Millisecond + 400, time.Millisecond + 234567, 2 * time.Millisecond, 10 * time.Millisecond} {
		l.Add(d)
	}
	got := l.Summary()
	want := Latency{Count: 4, P50MS: 2, P90MS: 10, P99MS: 10, MaxMS: 10, MeanMS: 4.059}
	if got != want {
		t.Fatalf("summary = %+v, want %+v", got, want)
	}
}
