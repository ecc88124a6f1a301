package embedded

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
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
// and fails above a ceiling: on file (its record stays in the log on
// disk) its index entry; in memory its record too, within what the
// memory budget counts for it. After draining, the heap must come back
// near the empty store's. docs/store/embedded.md, Queues, has the
// figures.
func TestQueuedMessageHeapCost(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 200 000 messages")
	}
	const n = 200_000
	// noise is the heap a measurement may be off by whatever n is (pools,
	// the log's buffers, bbolt's pages, other goroutines): the ceilings
	// below allow it once, not per message.
	const noise = 4 << 20
	body := make([]byte, 1024)
	for _, c := range []struct {
		name    string
		opts    func(t *testing.T) Options
		ceiling float64 // heap bytes a queued 1 KiB message may cost
	}{
		// On file a queued message is its FIFO entry; its record stays on disk.
		{"file", func(t *testing.T) Options { return Options{Path: filepath.Join(t.TempDir(), "snavio.db")} }, float64(localqueue.EntryBytes) + noise/n},
		// The budget counts the record (1024 bytes of body, the id and a
		// header: 1112) and localqueue.MsgOverhead; 5% more for the heap's size
		// classes and the noise of a 250 MiB measurement.
		{"memory", func(*testing.T) Options { return Options{Ephemeral: true, MemoryBudget: 1 << 30} }, 1.05 * (1112 + localqueue.MsgOverhead)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTest(t, c.opts(t))
			mustQueue(t, s, localqueue.QueueConfig{Name: "big", MaxDepth: localqueue.MaxMaxDepth})
			// Warm up what is not per message (segments, bbolt, the log's buffers).
			fillQueue(t, s, "big", 1000, body)
			drain(t, s, "big", 1000)
			empty := liveHeap()
			fillQueue(t, s, "big", n, body)
			full := liveHeap()
			per := float64(int64(full)-int64(empty)) / n
			t.Logf("live heap: empty %.1f MiB, %d queued 1 KiB messages %.1f MiB: %.1f bytes a queued message", mib(empty), n, mib(full), per)
			if per > c.ceiling {
				t.Errorf("a queued message costs %.1f bytes of heap, over the ceiling of %.0f", per, c.ceiling)
			}
			if qs, err := s.ListQueues(ctx); err != nil || qs[0].Visible != n {
				t.Fatalf("ListQueues = %+v, %v; want %d visible", qs, err, n)
			}
			drain(t, s, "big", n)
			after := liveHeap()
			t.Logf("live heap after draining: %.1f MiB (empty store %.1f MiB)", mib(after), mib(empty))
			if after > empty+noise {
				t.Errorf("live heap after draining %.1f MiB, over the empty store's %.1f MiB and %d MiB of noise", mib(after), mib(empty), noise>>20)
			}
		})
	}
}

// drain receives and deletes n messages of queue.
func drain(t testing.TB, s *Store, queue string, n int) {
	t.Helper()
	ctx := context.Background()
	for got := 0; got < n; {
		rs, err := s.Receive(ctx, queue, localqueue.MaxReceiveBatch, 0)
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
	const budget = 100 * (1024 + localqueue.MsgOverhead + 100)
	s := openTest(t, Options{Ephemeral: true, MemoryBudget: budget})
	mustQueue(t, s, localqueue.QueueConfig{Name: "q", MaxDepth: localqueue.MaxMaxDepth})
	body := make([]byte, 1024)
	sent := 0
	for ; ; sent++ {
		if _, err := s.Send(ctx, "q", body, nil); err != nil {
			if !errors.Is(err, localqueue.ErrMemoryBudget) {
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

// TestReceiveOrderAcrossFreshAndReceived: Receive takes fresh and
// received messages in one visibility order, before and after a restart
// (which rebuilds the fresh FIFO from the log).
func TestReceiveOrderAcrossFreshAndReceived(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	opts := Options{Path: filepath.Join(t.TempDir(), "snavio.db"), Clock: clk}
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			opts.Path = filepath.Join(t.TempDir(), "snavio.db")
			s := openTest(t, opts)
			mustQueue(t, s, localqueue.QueueConfig{Name: "q"})
			var ids []string
			for i := range 6 {
				clk.Advance(time.Second)
				id, err := s.Send(ctx, "q", []byte{byte('0' + i)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			// #0 and #1 received and given back: visible again now, after
			// #2..#5, which became visible when sent.
			clk.Advance(time.Second)
			got, err := s.Receive(ctx, "q", 2, 0)
			if err != nil || len(got) != 2 {
				t.Fatalf("receive: %v %v", got, err)
			}
			for _, r := range got {
				if err := s.ChangeMessageVisibility(ctx, "q", r.ReceiptHandle, 0); err != nil {
					t.Fatal(err)
				}
			}
			if restart {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openTest(t, opts)
			}
			clk.Advance(time.Second)
			got, err = s.Receive(ctx, "q", localqueue.MaxReceiveBatch, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, r := range got {
				order = append(order, string(r.Body))
				if r.ID != ids[r.Body[0]-'0'] {
					t.Fatalf("message %s has id %s, want %s", r.Body, r.ID, ids[r.Body[0]-'0'])
				}
			}
			if want := "2 3 4 5 0 1"; strings.Join(order, " ") != want {
				t.Fatalf("received %v, want %s", order, want)
			}
			if got[4].ReceiveCount != 2 || got[0].ReceiveCount != 1 {
				t.Fatalf("receive counts %d and %d, want 2 and 1", got[4].ReceiveCount, got[0].ReceiveCount)
			}
		})
	}
}

// TestABacklogIsNotCompacted: segments dense with queued messages stay
// where they are (compaction would copy the backlog forward again and
// again); once consumers drained them, they go.
func TestABacklogIsNotCompacted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), segmentBytes: 16 << 10})
	mustQueue(t, s, localqueue.QueueConfig{Name: "q"})
	body := make([]byte, 1024)
	for range 200 {
		if _, err := s.Send(ctx, "q", body, nil); err != nil {
			t.Fatal(err)
		}
	}
	segs := s.LogStats().Segments
	if segs <= walKeepSegments+1 {
		t.Fatalf("%d segments: the test needs more than %d sealed", segs, walKeepSegments)
	}
	frames := s.LogStats().Frames
	// Copying a dense segment forward makes another to copy: before the
	// fix maintain never returned here.
	done := make(chan struct{})
	go func() { s.maintain(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("maintain still running after 20 s: it is copying the backlog forward without end")
	}
	if st := s.LogStats(); st.Frames != frames || st.Segments != segs {
		t.Fatalf("maintain wrote %d frames and left %d of %d segments: it copied a backlog", st.Frames-frames, st.Segments, segs)
	}
	drain(t, s, "q", 200)
	if err := s.awaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	s.maintain()
	if st := s.LogStats(); st.Segments > walKeepSegments {
		t.Fatalf("%d segments left once drained", st.Segments)
	}
}
