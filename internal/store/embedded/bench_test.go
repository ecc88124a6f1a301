package embedded

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/localqueue"
)

// Micro-benchmarks of the write paths `dispatch serve` puts under load
// (docs/store/embedded.md, "Throughput"): per record, on an ephemeral store
// (the CPU cost: encoding, bbolt, the committer) and on a file (fsync).
// Writers run in parallel (b.SetParallelism) so group commit groups, as
// concurrent PutEvents requests do.

// benchParallelism * GOMAXPROCS writers run at once.
const benchParallelism = 8

func benchStore(b *testing.B, file bool) *Store {
	b.Helper()
	// The memory budget is raised: the benchmark measures a send's cost,
	// and b.N messages of 1.5 KiB can exceed the default.
	opts := Options{Ephemeral: true, MemoryBudget: 8 << 30}
	if file {
		opts = Options{Path: filepath.Join(b.TempDir(), "bench.db")}
	}
	s, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	if _, err := s.CreateQueue(context.Background(), localqueue.QueueConfig{Name: "q", MaxDepth: localqueue.MaxMaxDepth}); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchBody is a delivered command's size: a 1 KiB payload in its
// envelope.
var benchBody = bytes.Repeat([]byte("x"), 1500)

func benchAttrs(i int64) map[string]string {
	return map[string]string{"snavio.command_id": fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", i), "snavio.source": "bench/producer", "snavio.target": "bench", "snavio.command_name": "run"}
}

// forEachStore runs f on an ephemeral and on a file store, and reports
// the process's CPU time per op beside the wall time: on a shared, noisy
// machine the CPU cost is the steadier figure.
// With prefill, the queue gets b.N messages first (neither timed nor
// counted in cpu-ns/op).
func forEachStore(b *testing.B, prefill bool, f func(b *testing.B, s *Store)) {
	for _, file := range []bool{false, true} {
		name := "mem"
		if file {
			name = "file"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, file)
			if prefill {
				fill(b, s, b.N)
			}
			start := cpuTime()
			f(b, s)
			if used := cpuTime() - start; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkSend: one message per call, concurrent senders.
func BenchmarkSend(b *testing.B) {
	forEachStore(b, false, func(b *testing.B, s *Store) {
		var n atomic.Int64
		b.SetBytes(int64(len(benchBody)))
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Send(context.Background(), "q", benchBody, benchAttrs(n.Add(1))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// fill sends n messages (not timed).
func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for i := range n {
		if _, err := s.Send(context.Background(), "q", benchBody, benchAttrs(int64(i))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiveDelete: a consumer receives 10 and deletes them one
// call each (ns/op is per message).
func BenchmarkReceiveDelete(b *testing.B) {
	forEachStore(b, true, func(b *testing.B, s *Store) {
		ctx := context.Background()
		for done := 0; done < b.N; {
			msgs, err := s.Receive(ctx, "q", 10, time.Minute)
			if err != nil || len(msgs) == 0 {
				b.Fatalf("receive: %d messages, %v", len(msgs), err)
			}
			for _, m := range msgs {
				if err := s.DeleteMessage(ctx, "q", m.ReceiptHandle); err != nil {
					b.Fatal(err)
				}
			}
			done += len(msgs)
		}
	})
}

func benchEvent(i int64) ArchivedEvent {
	return ArchivedEvent{EventID: fmt.Sprintf("ev-%012d", i), Source: "bench/producer", DetailType: "snavio.command", Detail: benchBody, ReceivedAt: t0, Target: "bench", Command: "run"}
}

// BenchmarkArchiveAppend: one event per call, concurrent appenders.
func BenchmarkArchiveAppend(b *testing.B) {
	forEachStore(b, false, func(b *testing.B, s *Store) {
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.ArchiveAppend(context.Background(), benchEvent(n.Add(1))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAppendTelemetry: one delivered event per call, concurrent
// appenders on one tenant.
func BenchmarkAppendTelemetry(b *testing.B) {
	forEachStore(b, false, func(b *testing.B, s *Store) {
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e := []OutboxEntry{{Tenant: "bench", Event: delivered(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n.Add(1)))}}
				if _, err := s.AppendTelemetry(context.Background(), e); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkReceiveDeleteBatch: a consumer receives 10 and deletes them in
// one DeleteMessageBatch (ns/op is per message).
func BenchmarkReceiveDeleteBatch(b *testing.B) {
	forEachStore(b, true, func(b *testing.B, s *Store) {
		ctx := context.Background()
		for done := 0; done < b.N; {
			msgs, err := s.Receive(ctx, "q", 10, time.Minute)
			if err != nil || len(msgs) == 0 {
				b.Fatalf("receive: %d messages, %v", len(msgs), err)
			}
			handles := make([]string, len(msgs))
			for i, m := range msgs {
				handles[i] = m.ReceiptHandle
			}
			errs, err := s.DeleteMessageBatch(ctx, "q", handles)
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			done += len(msgs)
		}
	})
}

// BenchmarkArchiveAppendBatch: one PutEvents request's 10 events per call,
// concurrent appenders (ns/op is per event).
func BenchmarkArchiveAppendBatch(b *testing.B) {
	forEachStore(b, false, func(b *testing.B, s *Store) {
		var n atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			evs := make([]ArchivedEvent, 0, 10)
			flush := func() {
				if err := s.ArchiveAppendBatch(context.Background(), evs); err != nil {
					b.Error(err)
				}
				evs = evs[:0]
			}
			for pb.Next() {
				if evs = append(evs, benchEvent(n.Add(1))); len(evs) == cap(evs) {
					flush()
				}
			}
			if len(evs) > 0 {
				flush()
			}
		})
	})
}

// BenchmarkCommandOf: reading target and name from a 1 KiB command's
// detail, as every archived event needs; v1 is the encoding/json version
// it replaced.
func BenchmarkCommandOf(b *testing.B) {
	d := []byte(`{"metadata":{"id":"0f8fad5b-d9cb-469f-a165-000000000001","timestamp":"2026-11-21T12:00:00Z","type":"command","hmac":"` + string(bytes.Repeat([]byte("a"), 64)) + `","version":"hmac-v1"},"command":{"target":"bench","name":"run","payload":{"data":"` + string(bytes.Repeat([]byte("x"), 1012)) + `"}}}`)
	for _, impl := range []struct {
		name string
		f    func([]byte) (string, string)
	}{{"jsontext", commandOf}, {"v1", commandOfV1}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(d)))
			b.ReportAllocs()
			for b.Loop() {
				if t, _ := impl.f(d); t != "bench" {
					b.Fatal(t)
				}
			}
		})
	}
}
