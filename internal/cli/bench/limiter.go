package bench

import (
	"context"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Limiter paces sends to a rate shared by every worker: Take reserves the
// next n slots of a schedule with one slot every 1/rate and waits until the
// first is due. Slots left unused while nobody takes them are not saved up,
// so a slow server is never followed by a burst. Safe for concurrent use.
type Limiter struct {
	clk   clock.Clock
	sleep func(ctx context.Context, d time.Duration) error
	every time.Duration // 0: no limit

	mu   sync.Mutex
	next time.Time
}

// NewLimiter returns a limiter of rate slots per second (0: no limit) timed
// by clk; sleep waits (tests pass one that advances a fake clock).
func NewLimiter(rate float64, clk clock.Clock, sleep func(ctx context.Context, d time.Duration) error) *Limiter {
	l := &Limiter{clk: clk, sleep: sleep}
	if rate > 0 {
		l.every = time.Duration(float64(time.Second) / rate)
	}
	return l
}

// Take waits until n more slots are due, or ctx ends (its error).
func (l *Limiter) Take(ctx context.Context, n int) error {
	if l.every == 0 || n <= 0 {
		return ctx.Err()
	}
	l.mu.Lock()
	now := l.clk.Now()
	if l.next.Before(now) {
		l.next = now
	}
	due := l.next
	l.next = l.next.Add(time.Duration(n) * l.every)
	l.mu.Unlock()
	if d := due.Sub(now); d > 0 {
		return l.sleep(ctx, d)
	}
	return ctx.Err()
}
