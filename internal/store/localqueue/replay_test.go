package localqueue

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// TestReplayRebuildsTheQueues: the queues rebuilt from the log hold the
// messages, states and deletions written before, in their order.
func TestReplayRebuildsTheQueues(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	qs, closeQueues := openQueuesAt(t, dir, clk, true)
	mustQueue(t, qs, QueueConfig{Name: "q"})
	var ids []string
	for _, b := range []string{"a", "b", "c", "d"} {
		id, err := qs.Send(ctx, "q", []byte(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	got, err := qs.Receive(ctx, "q", 2, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %d %v", len(got), err)
	}
	if err := qs.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if err := closeQueues(); err != nil {
		t.Fatal(err)
	}
	qs, _ = openQueuesAt(t, dir, clk, true)
	st, err := qs.ListQueues(ctx)
	if err != nil || len(st) != 1 || st[0].Visible != 2 || st[0].InFlight != 1 {
		t.Fatalf("after replay: %+v %v: want 2 visible, b in flight", st, err)
	}
	clk.Advance(2 * time.Minute)
	again, err := qs.Receive(ctx, "q", 10, time.Minute)
	if err != nil || len(again) != 3 {
		t.Fatalf("receive after replay: %d %v", len(again), err)
	}
	// In the order they became visible: b (visible again now) after c
	// and d, which were visible since they were sent.
	want := []string{ids[2], ids[3], ids[1]}
	for i, m := range again {
		if m.ID != want[i] {
			t.Fatalf("message %d is %s, want %s (order %v)", i, m.ID, want[i], want)
		}
	}
	if again[2].ReceiveCount != 2 {
		t.Fatalf("b's receive count %d after replay, want 2", again[2].ReceiveCount)
	}
}

// FuzzReplaySegment: the queues replay any bytes read as a log segment
// without panicking, and the segment's live count is the messages they
// hold.
func FuzzReplaySegment(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	qs, closeQueues := openQueuesAt(f, dir, clock.NewFake(t0), true)
	if _, err := qs.CreateQueue(ctx, QueueConfig{Name: "q"}); err != nil {
		f.Fatal(err)
	}
	for _, b := range []string{"a", "b"} {
		if _, err := qs.Send(ctx, "q", []byte(b), map[string]string{"k": "v"}); err != nil {
			f.Fatal(err)
		}
	}
	got, err := qs.Receive(ctx, "q", 1, time.Minute)
	if err != nil || len(got) != 1 {
		f.Fatalf("receive: %d %v", len(got), err)
	}
	if err := qs.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		f.Fatal(err)
	}
	if _, err := qs.PurgeQueue(ctx, "q"); err != nil {
		f.Fatal(err)
	}
	if err := closeQueues(); err != nil {
		f.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(dir, "wal", wal.SegmentName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, uint64(1))
	f.Add(seg[:len(seg)-3], uint64(1))
	f.Add([]byte{}, uint64(1))
	f.Add(seg, uint64(2)) // a spare file's old frames
	f.Fuzz(func(t *testing.T, data []byte, first uint64) {
		first = min(max(first, 1), 1<<62)
		logDir := t.TempDir()
		if err := os.WriteFile(filepath.Join(logDir, wal.SegmentName(first)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		qs := New(Config{Clock: clock.NewFake(t0)})
		q := newMemQueue(Queue{QueueConfig: QueueConfig{Name: "q", MaxDepth: DefaultMaxDepth}})
		q.recovering = make(map[uuid.UUID]freshMsg)
		qs.queues["q"] = q
		var sg *wal.Segment
		replay := func(seg *wal.Segment, lsn uint64, ops []wal.Op) (bool, error) {
			sg = seg
			for _, op := range ops {
				if !IsOp(op.Kind) {
					continue
				}
				if err := qs.Replay(seg, lsn, op); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		w, err := wal.Open(wal.Config[Changes]{Dir: logDir, Replay: replay, OnCommitted: qs.Committed})
		if err != nil {
			return // a damaged log is refused
		}
		qs.Start(w)
		if err := w.CloseFiles(); err != nil {
			t.Fatal(err)
		}
		if sg != nil && sg.Live != q.depth() {
			t.Fatalf("live count %d for %d messages", sg.Live, q.depth())
		}
	})
}
