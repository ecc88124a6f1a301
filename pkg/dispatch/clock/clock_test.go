package clock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f := NewFake(start)
	if got := f.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	if got := f.Advance(90 * time.Second); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("Advance returned %v", got)
	}
	f.Set(start)
	if got := f.Now(); !got.Equal(start) {
		t.Fatalf("after Set, Now() = %v, want %v", got, start)
	}
}

func TestFakeConcurrentAdvance(t *testing.T) {
	start := time.Unix(0, 0).UTC()
	f := NewFake(start)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Advance(time.Second)
			_ = f.Now()
		}()
	}
	wg.Wait()
	if got, want := f.Now(), start.Add(50*time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
}

func TestSystemIsWallClock(t *testing.T) {
	before := time.Now()
	got := System().Now()
	if got.Before(before) {
		t.Fatalf("System().Now() = %v is before %v", got, before)
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("Sleep(1µs) = %v", err)
	}
}
