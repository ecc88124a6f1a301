package awsstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The reset path under contention: many writers find the same expired
// item (not yet deleted by TTL) at once. Exactly one may replace it; the
// others must take from the new one, never from the dead one or from a
// replacement of their own.

func TestConcurrentTakesOnAnExpiredCounter(t *testing.T) {
	ctx := context.Background()
	s := newFlowStore(t, nil)
	if g, err := s.Take(ctx, "k", 10, 10, t0.Add(time.Second), t0); err != nil || g != 10 {
		t.Fatalf("fill: %d %v", g, err)
	}
	now := t0.Add(2 * time.Second) // the counter is dead, still stored
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				g, err := s.Take(ctx, "k", 2, 25, now.Add(time.Minute), now)
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(g)
			}
		}()
	}
	wg.Wait()
	if total.Load() != 25 {
		t.Fatalf("granted %d after expiry, want exactly the new limit 25", total.Load())
	}
}

func TestConcurrentAcquiresOnAnExpiredLease(t *testing.T) {
	ctx := context.Background()
	s := newFlowStore(t, nil)
	for i := range 3 {
		if ok, err := s.Acquire(ctx, "slot", fmt.Sprint("old", i), 3, t0.Add(time.Second), t0); err != nil || !ok {
			t.Fatalf("old holder %d: %v %v", i, ok, err)
		}
	}
	now := t0.Add(2 * time.Second)
	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Acquire(ctx, "slot", fmt.Sprint("new", i), 3, now.Add(time.Second), now)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 3 {
		t.Fatalf("%d holders acquired the expired lease of max 3, want 3", won.Load())
	}
}
