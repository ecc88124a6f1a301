package server

import "sync"

// limiter counts units in use against a fixed maximum. It never waits:
// tryAcquire either takes the units at once or refuses, so saturation turns
// into an immediate 503 instead of a queue.
type limiter struct {
	mu   sync.Mutex
	used int64
	max  int64
}

func newLimiter(max int) *limiter { return &limiter{max: int64(max)} }

func newLimiter64(max int64) *limiter { return &limiter{max: max} }

// tryAcquire takes n units if they fit under the maximum.
func (l *limiter) tryAcquire(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used+int64(n) > l.max {
		return false
	}
	l.used += int64(n)
	return true
}

// release gives back n units taken by tryAcquire.
func (l *limiter) release(n int) {
	l.mu.Lock()
	l.used -= int64(n)
	l.mu.Unlock()
}

// inUse reports the units taken now.
func (l *limiter) inUse() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used
}

// saturation reports the fraction of the maximum in use, 0 to 1.
func (l *limiter) saturation() float64 {
	if l.max <= 0 {
		return 0
	}
	return float64(l.inUse()) / float64(l.max)
}
