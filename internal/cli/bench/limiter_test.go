package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// advancing returns a sleep that moves clk forward and records each wait.
func advancing(clk *clock.Fake, waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		clk.Advance(d)
		return ctx.Err()
	}
}

func TestLimiterPacesToTheRate(t *testing.T) {
	clk := clock.NewFake(t0)
	var waits []time.Duration
	l := NewLimiter(100, clk, advancing(clk, &waits))
	for range 100 {
		if err := l.Take(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The first is due at once, each next 10 ms later: 100 in 990 ms.
	if got := clk.Now().Sub(t0); got != 990*time.Millisecond {
		t.Fatalf("100 takes at 100/s took %v, want 990ms", got)
	}
	if len(waits) != 99 || slices.ContainsFunc(waits, func(d time.Duration) bool { return d != 10*time.Millisecond }) {
		t.Fatalf("waits = %v, want 99 of 10ms", waits)
	}
}

func TestLimiterBatchReservesItsSlots(t *testing.T) {
	clk := clock.NewFake(t0)
	var waits []time.Duration
	l := NewLimiter(100, clk, advancing(clk, &waits))
	for range 3 {
		_ = l.Take(context.Background(), 10)
	}
	// 10 entries take 100 ms of the schedule: the third batch is due at 200 ms.
	if got := clk.Now().Sub(t0); got != 200*time.Millisecond {
		t.Fatalf("3 batches of 10 at 100/s: clock at %v, want 200ms", got)
	}
}

func TestLimiterSavesNoBurstWhileIdle(t *testing.T) {
	clk := clock.NewFake(t0)
	var waits []time.Duration
	l := NewLimiter(10, clk, advancing(clk, &waits))
	_ = l.Take(context.Background(), 1)
	clk.Advance(time.Minute) // idle: 600 slots pass unused
	_ = l.Take(context.Background(), 1)
	_ = l.Take(context.Background(), 1)
	if !slices.Equal(waits, []time.Duration{100 * time.Millisecond}) {
		t.Fatalf("after an idle minute, waits = %v, want one of 100ms (no burst)", waits)
	}
}

// TestLimiterSharedByWorkers: concurrent takers get distinct, evenly
// spaced slots (the clock does not move, so each wait is its slot).
func TestLimiterSharedByWorkers(t *testing.T) {
	clk := clock.NewFake(t0)
	var mu sync.Mutex
	var waits []time.Duration
	l := NewLimiter(1000, clk, func(_ context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_ = l.Take(context.Background(), 1)
			}
		}()
	}
	wg.Wait()
	slices.Sort(waits)
	if len(waits) != 99 {
		t.Fatalf("%d waits, want 99 (the first slot is due at once)", len(waits))
	}
	for i, d := range waits {
		if want := time.Duration(i+1) * time.Millisecond; d != want {
			t.Fatalf("wait %d = %v, want %v", i, d, want)
		}
	}
}

func TestLimiterNoLimitAndCancel(t *testing.T) {
	clk := clock.NewFake(t0)
	l := NewLimiter(0, clk, func(context.Context, time.Duration) error {
		t.Fatal("a limiter without a rate slept")
		return nil
	})
	for range 1000 {
		if err := l.Take(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Take(ctx, 1); err == nil {
		t.Fatal("Take on a cancelled context returned nil")
	}
	var waits []time.Duration
	l = NewLimiter(1, clk, advancing(clk, &waits))
	_ = l.Take(context.Background(), 1)
	if err := l.Take(ctx, 1); err == nil {
		t.Fatal("a waiting Take on a cancelled context returned nil")
	}
}
