package devserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// TestMemoryBudgetRefusesAtTheIngress: an in-memory store whose queued
// messages near its budget makes PutEvents answer 503 with Retry-After
// and /readyz say memory_budget, before anything is read; once drained,
// both recover.
func TestMemoryBudgetRefusesAtTheIngress(t *testing.T) {
	ctx := context.Background()
	const budget = 256 << 10
	s, err := Start(ctx, Options{DataDir: t.TempDir(), Ephemeral: true, MemoryBudget: budget, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	url := s.Info().URL
	if code, reason := readyz(t, url); code != 200 {
		t.Fatalf("/readyz at start: %d %s", code, reason)
	}
	if _, err := s.store.CreateQueue(ctx, localqueue.QueueConfig{Name: "backlog"}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1024)
	sent := 0
	for {
		if _, err := s.store.Send(ctx, "backlog", body, nil); err != nil {
			if !errors.Is(err, localqueue.ErrMemoryBudget) {
				t.Fatal(err)
			}
			break
		}
		sent++
	}
	if code, reason := readyz(t, url); code != 503 || reason != ReasonMemoryBudget {
		t.Fatalf("/readyz with the budget spent: %d %q, want 503 %s", code, reason, ReasonMemoryBudget)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader([]byte(`{"Entries":[]}`)))
	req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
	req.Header.Set("X-Amz-Target", server.TargetPutEvents)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Amzn-Errortype") != server.ErrCodeThrottling {
		t.Fatalf("PutEvents with the budget spent: %d, Retry-After %q, type %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Amzn-Errortype"))
	}
	if n, err := s.store.PurgeQueue(ctx, "backlog"); err != nil || n != sent {
		t.Fatalf("purge: %d of %d, %v", n, sent, err)
	}
	if code, reason := readyz(t, url); code != 200 {
		t.Fatalf("/readyz once drained: %d %s", code, reason)
	}
}

// TestMillionQueuedRSS is issue #20's memory goal: 1 000 000 queued 1 KiB
// messages on the file store in at most 256 MiB of RSS, with the
// collector tuned as dispatch serve tunes it. It writes about 1.2 GB of
// log: set SNAVIO_TEST_1M=1 to run it (about 30 s here). Drained, the
// heap must come back to the empty store's.
func TestMillionQueuedRSS(t *testing.T) {
	if os.Getenv("SNAVIO_TEST_1M") == "" {
		t.Skip("set SNAVIO_TEST_1M=1: sends 1 000 000 messages (about 1.2 GB of log)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Log(TuneGC("", ""))
	const n, limit = 1_000_000, 256 << 20
	ctx := context.Background()
	st, err := embedded.Open(embedded.Options{Path: filepath.Join(t.TempDir(), StoreFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: "backlog", MaxDepth: localqueue.MaxMaxDepth}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1024)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	empty := ms.HeapAlloc
	start := rss(t)
	peak := start
	// Requests of 10 messages from 8 producers, as PutEvents batches.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 10; i < n; i += 80 {
				dctx, d := embedded.DeferSync(ctx)
				for range 10 {
					if _, err := st.Send(dctx, "backlog", body, nil); err != nil {
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
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(100 * time.Millisecond):
		}
		peak = max(peak, rss(t))
	}
	qs, err := st.ListQueues(ctx)
	if err != nil || qs[0].Visible != n {
		t.Fatalf("ListQueues = %+v, %v; want %d queued", qs, err, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("%d queued 1 KiB messages: RSS %.0f MiB at the start, peak %.0f MiB, live heap %.0f MiB", n, float64(start)/(1<<20), float64(peak)/(1<<20), float64(ms.HeapAlloc)/(1<<20))
	if peak > limit {
		t.Errorf("peak RSS %.0f MiB, over %d MiB", float64(peak)/(1<<20), limit>>20)
	}

	// Drained, the heap comes back to the empty store's level.
	for got := 0; got < n; {
		rs, err := st.Receive(ctx, "backlog", localqueue.MaxReceiveBatch, 0)
		if err != nil || len(rs) == 0 {
			t.Fatalf("drained %d of %d: %v", got, n, err)
		}
		handles := make([]string, len(rs))
		for i, r := range rs {
			handles[i] = r.ReceiptHandle
		}
		if _, err := st.DeleteMessageBatch(ctx, "backlog", handles); err != nil {
			t.Fatal(err)
		}
		got += len(rs)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	drained := rss(t)
	debug.FreeOSMemory()
	t.Logf("drained: live heap %.1f MiB (%.1f MiB at the start), RSS %.0f MiB, %.0f MiB once the runtime returned its free pages", float64(ms.HeapAlloc)/(1<<20), float64(empty)/(1<<20), float64(drained)/(1<<20), float64(rss(t))/(1<<20))
	if ms.HeapAlloc > 2*empty+1<<20 {
		t.Errorf("live heap %.1f MiB once drained, over twice the empty store's %.1f MiB", float64(ms.HeapAlloc)/(1<<20), float64(empty)/(1<<20))
	}
}

// rss is the process's resident set (VmRSS of /proc/self/status).
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
