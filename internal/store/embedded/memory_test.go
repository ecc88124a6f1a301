package embedded

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

// FillQueue sends n messages of body to queue through the store API, in
// deferred batches from a few goroutines (as the dispatcher's requests
// do), and fails t on the first error.
func fillQueue(t testing.TB, s *Store, queue string, n int, body []byte) {
	t.Helper()
	const workers, batch = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int, workers)
	go func() {
		for i := 0; i < n; i += batch {
			next <- min(batch, n-i)
		}
		close(next)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				ctx, d := DeferSync(context.Background())
				for range k {
					if _, err := s.Send(ctx, queue, body, nil); err != nil {
						errs <- err
						return
					}
				}
				if err := d.Wait(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestQueuedMessageHeapCost measures the live heap a queued message costs
// on the file store (its body stays in the log on disk) and fails above
// a ceiling; after draining, the heap must come back near the empty
// store's. docs/store/embedded.md, Queues, has the figures.
func TestQueuedMessageHeapCost(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 200 000 messages")
	}
	const n = 200_000
	// What a queued message may cost on the file store, in heap bytes.
	const ceiling = 64
	ctx := context.Background()
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")})
	mustQueue(t, s, QueueConfig{Name: "big", MaxDepth: MaxMaxDepth})
	body := make([]byte, 1024)
	// Warm up what is not per message (segments, bbolt, the log's buffers).
	fillQueue(t, s, "big", 1000, body)
	drain(t, s, "big", 1000)
	empty := liveHeap()
	fillQueue(t, s, "big", n, body)
	full := liveHeap()
	per := float64(int64(full)-int64(empty)) / n
	t.Logf("live heap: empty %.1f MiB, %d queued 1 KiB messages %.1f MiB: %.1f bytes a queued message", mib(empty), n, mib(full), per)
	if per > ceiling {
		t.Errorf("a queued message costs %.1f bytes of heap, over the ceiling of %d", per, ceiling)
	}
	if qs, err := s.ListQueues(ctx); err != nil || qs[0].Visible != n {
		t.Fatalf("ListQueues = %+v, %v; want %d visible", qs, err, n)
	}
	drain(t, s, "big", n)
	after := liveHeap()
	t.Logf("live heap after draining: %.1f MiB (empty store %.1f MiB)", mib(after), mib(empty))
	if after > 2*empty+1<<20 {
		t.Errorf("live heap after draining %.1f MiB, over twice the empty store's %.1f MiB", mib(after), mib(empty))
	}
}

// drain receives and deletes n messages of queue.
func drain(t testing.TB, s *Store, queue string, n int) {
	t.Helper()
	ctx := context.Background()
	for got := 0; got < n; {
		rs, err := s.Receive(ctx, queue, MaxReceiveBatch, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("drained %d of %d messages, then found none visible", got, n)
		}
		handles := make([]string, len(rs))
		for i, r := range rs {
			handles[i] = r.ReceiptHandle
		}
		errs, err := s.DeleteMessageBatch(ctx, queue, handles)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
		got += len(rs)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// TestEphemeralMemoryBudget: an in-memory store refuses a send once its
// queued messages would pass the budget, and takes sends again once a
// consumer drained some.
func TestEphemeralMemoryBudget(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(Options{Ephemeral: true, MemoryBudget: -1}); err == nil {
		t.Fatal("Open took a negative memory budget")
	}
	const budget = 100 * (1024 + msgOverhead + 100)
	s := openTest(t, Options{Ephemeral: true, MemoryBudget: budget})
	mustQueue(t, s, QueueConfig{Name: "q", MaxDepth: MaxMaxDepth})
	body := make([]byte, 1024)
	sent := 0
	for ; ; sent++ {
		if _, err := s.Send(ctx, "q", body, nil); err != nil {
			if !errors.Is(err, ErrMemoryBudget) {
				t.Fatalf("send %d: %v, want ErrMemoryBudget", sent, err)
			}
			break
		}
		if sent > 1000 {
			t.Fatal("1000 sends of 1 KiB fit a budget of 100")
		}
	}
	used, b := s.MemoryUse()
	if sent < 90 || used > b || b != budget {
		t.Fatalf("%d sends taken, %d of %d bytes used", sent, used, b)
	}
	drain(t, s, "q", 10)
	if _, err := s.Send(ctx, "q", body, nil); err != nil {
		t.Fatalf("send after draining: %v", err)
	}
	drain(t, s, "q", sent-9)
	if used, _ := s.MemoryUse(); used != 0 {
		t.Fatalf("%d bytes counted with the queue empty", used)
	}
}
