package bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Latencies collects durations; safe for concurrent use.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Latency summarises durations in milliseconds (to the microsecond).
type Latency struct {
	Count  int     `json:"count"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// Summary returns the count, percentiles, maximum and mean so far.
func (l *Latencies) Summary() Latency {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Latency{
		Count: len(d),
		P50MS: ms(Percentile(d, 50)), P90MS: ms(Percentile(d, 90)), P99MS: ms(Percentile(d, 99)),
		MaxMS: ms(d[len(d)-1]), MeanMS: ms(sum / time.Duration(len(d))),
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it, always one of the values (0 for none).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// ms is d in milliseconds rounded to the microsecond, so that JSON shows
// 1.234 and not 1.2340000000000002.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
