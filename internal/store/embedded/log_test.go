package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// receiveAll receives every visible message of queue (holding them for an
// hour), by id.
func receiveAll(t testing.TB, s *Store, queue string) map[string]localqueue.Received {
	t.Helper()
	out := map[string]localqueue.Received{}
	for {
		got, err := s.Receive(context.Background(), queue, localqueue.MaxReceiveBatch, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return out
		}
		for _, m := range got {
			out[m.ID] = m
		}
	}
}

// TestLogReopenKeepsQueueState: every kind of queue change (send, receive,
// delete, visibility change, purge, redrive) is rebuilt from the log after
// a restart, with the telemetry and archive the log applied.
func TestLogReopenKeepsQueueState(t *testing.T) {
	t.Run("sync on demand", func(t *testing.T) { testReopenKeepsQueueState(t, 0) })
	t.Run("sync interval", func(t *testing.T) { testReopenKeepsQueueState(t, time.Hour) })
}

func testReopenKeepsQueueState(t *testing.T, syncEvery time.Duration) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "snavio.db")
	s, err := Open(Options{Path: path, Clock: clk, SyncEvery: syncEvery})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []localqueue.QueueConfig{{Name: "dlq"}, {Name: "q", DeadLetterQueue: "dlq", MaxReceives: 1}, {Name: "p"}} {
		if _, err := s.CreateQueue(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]string, 5)
	for i := range ids {
		if ids[i], err = s.Send(ctx, "q", []byte(fmt.Sprintf("body-%d", i)), map[string]string{"n": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	// Receive the first three; delete #0, give #1 back now, keep #2.
	got, err := s.Receive(ctx, "q", 3, time.Minute)
	if err != nil || len(got) != 3 {
		t.Fatalf("receive: %v %v", got, err)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeMessageVisibility(ctx, "q", got[1].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	keep := got[2]
	// #1 was received once (MaxReceives 1): the next receive moves it to
	// the dead-letter queue and returns #3 and #4.
	again, err := s.Receive(ctx, "q", 10, time.Minute)
	if err != nil || len(again) != 2 {
		t.Fatalf("second receive: %v %v", again, err)
	}
	for _, b := range []string{"x", "y"} {
		if _, err := s.Send(ctx, "p", []byte(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PurgeQueue(ctx, "p"); err != nil || n != 2 {
		t.Fatalf("purge: %d %v", n, err)
	}
	survivor, err := s.Send(ctx, "p", []byte("after purge"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t", Reason: telemetry.DroppedQueueUnconsumed}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: "ev-1", Source: "t/x", DetailType: "snavio.command", Detail: []byte(`{}`), ReceivedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, Options{Path: path, Clock: clk, SyncEvery: syncEvery})
	stats, err := s.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string][2]int{}
	for _, st := range stats {
		counts[st.Name] = [2]int{st.Visible, st.InFlight}
	}
	// q: #2, #3, #4 in flight; dlq: #1 visible; p: the survivor.
	if want := map[string][2]int{"q": {0, 3}, "dlq": {1, 0}, "p": {1, 0}}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("after reopen: %v, want %v", counts, want)
	}
	// The kept receipt handle is still the message's latest.
	if err := s.DeleteMessage(ctx, "q", keep.ReceiptHandle); err != nil {
		t.Fatalf("delete with a handle from before the restart: %v", err)
	}
	dl := receiveAll(t, s, "dlq")
	m, ok := dl[ids[1]]
	if !ok || string(m.Body) != "body-1" || m.Attributes["n"] != "1" || m.Attributes[localqueue.AttrDLQReason] != localqueue.DLQReasonMaxReceives {
		t.Fatalf("dead-letter queue after reopen: %+v", dl)
	}
	if p := receiveAll(t, s, "p"); len(p) != 1 || string(p[survivor].Body) != "after purge" {
		t.Fatalf("purged queue after reopen: %+v", p)
	}
	clk.Advance(time.Minute)
	q := receiveAll(t, s, "q")
	if len(q) != 0 {
		// #3 and #4 were received once already: they move to the DLQ.
		t.Fatalf("q after its messages' second receive: %+v", q)
	}
	if dl := receiveAll(t, s, "dlq"); len(dl) != 2 || dl[ids[3]].ReceiveCount != 1 {
		t.Fatalf("dead-letter queue: %+v", dl)
	}
	if recs, err := s.ReadTelemetry(ctx, "t", 0, 10); err != nil || len(recs) != 1 {
		t.Fatalf("telemetry after reopen: %v %v", recs, err)
	}
	if _, ok, err := s.ArchiveGet(ctx, "ev-1"); err != nil || !ok {
		t.Fatalf("archive after reopen: %v %v", ok, err)
	}
}

// TestLogSegmentsAreDeletedAndCompacted: segments whose messages are gone
// are deleted; a message left behind in an old segment is copied forward
// so that its segment can go, and it survives a restart intact.
func TestLogSegmentsAreDeletedAndCompacted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	opts := Options{Path: path, segmentBytes: 4 << 10}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	// The first message stays in the queue throughout.
	stay, err := s.Send(ctx, "q", []byte("left behind"), map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(ctx, "q", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1000)
	for i := range 200 {
		passThrough(t, s, body, i)
		if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t", Reason: telemetry.DroppedQueueUnconsumed}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 200 KB went through 4 KiB segments; let the upkeep catch up.
	if err := s.awaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	s.maintain()
	st := s.LogStats()
	if st.Segments > walKeepSegments+2 || st.UpkeepError != "" {
		t.Fatalf("log stats %+v: segments are not deleted", st)
	}
	firsts, spares, err := wal.ListSegments(path + walSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if len(firsts) != st.Segments || len(spares) > wal.SpareSegments {
		t.Fatalf("%d segment files for %d segments, and %d spares (at most %d)", len(firsts), st.Segments, len(spares), wal.SpareSegments)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	if _, err := s.ReleaseInFlight(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, s, "q")
	if len(got) != 1 || string(got[stay].Body) != "left behind" || got[stay].Attributes["k"] != "v" || got[stay].ReceiveCount != 2 {
		t.Fatalf("after compaction and restart: %+v", got)
	}
	if recs, err := s.ReadTelemetry(ctx, "t", 0, MaxReadPage); err != nil || len(recs) != 200 {
		t.Fatalf("telemetry: %d records, %v", len(recs), err)
	}
}

// passThrough sends body to queue "q", receives it and deletes it: one
// round of a queue whose messages go through, which fills the log's
// segments with frames nothing needs afterwards. i numbers the round in
// errors.
func passThrough(t *testing.T, s *Store, body []byte, i int) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Send(ctx, "q", body, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Receive(ctx, "q", 1, time.Hour)
	if err != nil || len(got) != 1 {
		t.Fatalf("round %d: %v %v", i, got, err)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
}

// lastSegment returns the path of the newest segment of the store at path.
func lastSegment(t testing.TB, path string) string {
	t.Helper()
	firsts, _, err := wal.ListSegments(path + walSuffix)
	if err != nil || len(firsts) == 0 {
		t.Fatalf("segments: %v %v", firsts, err)
	}
	return filepath.Join(path+walSuffix, wal.SegmentName(firsts[len(firsts)-1]))
}

// TestLogTornTailIsCutAndDamageRefused: a partial frame at the end of the
// last segment (a write the crash interrupted, never acknowledged) is cut
// off; damage before the end of the log refuses Open with what to do.
func TestLogTornTailIsCutAndDamageRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	s, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Send(ctx, "q", []byte("kept"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The segment the next Open recovers is this one: nothing follows.
	seg := lastSegment(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// A torn frame: a header promising more than follows.
	torn := binary.BigEndian.AppendUint32(nil, 100)
	torn = append(torn, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 9, 1)
	if err := os.WriteFile(seg, append(append([]byte(nil), whole...), torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Path: path})
	if err != nil {
		t.Fatalf("open after a torn tail: %v", err)
	}
	if got := receiveAll(t, s, "q"); len(got) != 1 || string(got[id].Body) != "kept" {
		t.Fatalf("after a torn tail: %+v", got)
	}
	if _, err := s.Send(ctx, "q", []byte("next"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(len(whole)) {
		t.Fatalf("torn tail not cut: %v %v", fi.Size(), err)
	}

	// Flip a byte inside the first frame of a segment that is followed by
	// another: the log cannot be trusted past it.
	broken := append([]byte(nil), whole...)
	broken[wal.HeaderLen+2] ^= 0xff
	if err := os.WriteFile(seg, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Path: path})
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "restore the data directory from a backup") {
		t.Fatalf("open over a damaged segment: %v", err)
	}
}

// TestLogFailureStopsWrites: once a write to the log fails, every later
// write fails with ErrLogFailed instead of acknowledging what may not be
// durable.
func TestLogFailureStopsWrites(t *testing.T) {
	ctx := context.Background()
	disk := &failingDisk{}
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), logIO: disk.io()})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	disk.failed.Store(true)
	if _, err := s.Send(ctx, "q", []byte("a"), nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("send over a failed log: %v", err)
	}
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t"}}}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append over a failed log: %v", err)
	}
	if got := receiveAll(t, s, "q"); len(got) != 0 {
		t.Fatalf("a message that failed to be written was queued: %+v", got)
	}
}

// FuzzRecoverSegment: a store opens over any bytes as its log's segment
// without panicking: it recovers, or refuses a damaged log. What it
// recovered it recovers again the same after a Close (the queues' own
// replay is fuzzed by localqueue's FuzzReplaySegment).
func FuzzRecoverSegment(f *testing.F) {
	// A store file with queue q, and a segment of every op kind, written
	// by a store.
	ctx := context.Background()
	base := f.TempDir()
	s, err := Open(Options{Path: filepath.Join(base, "snavio.db")})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		f.Fatal(err)
	}
	now := time.Now()
	rec := flow.DedupeRecord{Tenant: "t", ID: "c", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "o", ExpiresAt: now.Add(time.Minute)}
	if _, _, err := s.Claim(ctx, rec, now); err != nil {
		f.Fatal(err)
	}
	if _, err := s.Deliver(ctx, Delivery{Queue: "q", Body: []byte("b"), Attributes: map[string]string{"a": "b"},
		Claim: &ClaimCompletion{ID: rec.Key(), Owner: "o", ExpiresAt: now.Add(time.Hour), Now: now},
		Event: &OutboxEntry{Tenant: "t", Event: telemetry.Dropped{Tenant: "t"}}}); err != nil {
		f.Fatal(err)
	}
	for _, m := range receiveAll(f, s, "q") {
		if err := s.DeleteMessage(ctx, "q", m.ReceiptHandle); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: "e", Source: "t/x", DetailType: "d", Detail: []byte("{}"), ReceivedAt: now}); err != nil {
		f.Fatal(err)
	}
	if _, err := s.PurgeQueue(ctx, "q"); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(base, "snavio.db"))
	if err != nil {
		f.Fatal(err)
	}
	seg, err := os.ReadFile(lastSegment(f, filepath.Join(base, "snavio.db")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, uint64(1))
	f.Add(seg[:len(seg)-3], uint64(1))
	f.Add([]byte{}, uint64(1))
	f.Add(seg, uint64(2)) // a spare file's old frames
	f.Fuzz(func(t *testing.T, data []byte, first uint64) {
		first = min(max(first, 1), 1<<62)
		path := filepath.Join(t.TempDir(), "snavio.db")
		if err := os.WriteFile(path, db, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path+walSuffix, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path+walSuffix, wal.SegmentName(first)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		depth := func() int {
			s, err := Open(Options{Path: path})
			if err != nil {
				return -1
			}
			defer s.Close()
			qs, err := s.ListQueues(context.Background())
			if err != nil || len(qs) != 1 {
				t.Fatalf("queues %+v, %v", qs, err)
			}
			return qs[0].Visible + qs[0].InFlight
		}
		if d := depth(); d >= 0 {
			if again := depth(); again != d {
				t.Fatalf("%d messages recovered, then %d after reopening", d, again)
			}
		}
	})
}

// TestDeferredWritesSettleOnWait: under DeferSync a write returns once
// queued; Wait returns once all are durable, and reports a log failure
// the writes themselves did not.
func TestDeferredWritesSettleOnWait(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	disk := &failingDisk{}
	s := openTest(t, Options{Path: path, logIO: disk.io()})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	dctx, d := DeferSync(ctx)
	var ids []string
	for i := range 5 {
		id, err := s.Send(dctx, "q", []byte{byte('a' + i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := s.ArchiveAppend(dctx, ArchivedEvent{EventID: "ev", Source: "t/x", DetailType: "d", Detail: []byte("{}"), ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, s, "q")
	for _, id := range ids {
		if _, ok := got[id]; !ok || len(got) != len(ids) {
			t.Fatalf("after Wait: %d messages, %s missing", len(got), id)
		}
	}
	if _, ok, err := s.ArchiveGet(ctx, "ev"); err != nil || !ok {
		t.Fatalf("archived after Wait: %v %v", ok, err)
	}
	// A failing log: the deferred write is queued, Wait reports it.
	disk.failed.Store(true)
	dctx, d = DeferSync(ctx)
	if _, err := s.Send(dctx, "q", []byte("z"), nil); err != nil {
		t.Fatalf("a deferred send fails only if it cannot be queued: %v", err)
	}
	if err := d.Wait(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Wait over a failed log: %v", err)
	}
}

// TestOnAppliedWakesReaders: OnApplied is called once telemetry written to
// the log can be read.
func TestOnAppliedWakesReaders(t *testing.T) {
	ctx := context.Background()
	applied := make(chan struct{}, 16)
	s := openTest(t, Options{Ephemeral: true, OnApplied: func() {
		select {
		case applied <- struct{}{}:
		default:
		}
	}})
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatal("OnApplied was not called within 10 s of an append")
	}
	// Read without waiting on the store: the record is in the file.
	var n int
	if err := s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(bOutbox).Bucket(bTenants).Bucket([]byte("t"))
		if tb != nil {
			n = tb.Bucket(bEv).Stats().KeyN
		}
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("after OnApplied: %d records in the file, %v", n, err)
	}
}

// TestQueueMethodsAfterCloseAreRefused: after Close every queue method
// returns ErrClosed, including those that would not write.
func TestQueueMethodsAfterCloseAreRefused(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Options{Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(ctx, "q", 1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Receive: %v", err)
	}
	if _, err := s.Send(ctx, "q", []byte("x"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send: %v", err)
	}
	if _, err := s.ListQueues(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("ListQueues: %v", err)
	}
	if _, err := s.GetQueue(ctx, "q"); !errors.Is(err, ErrClosed) {
		t.Errorf("GetQueue: %v", err)
	}
	if _, err := s.PurgeQueue(ctx, "q"); !errors.Is(err, ErrClosed) {
		t.Errorf("PurgeQueue: %v", err)
	}
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t"}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendTelemetry: %v", err)
	}
}

// copyDir copies the regular files of src (one level of subdirectories)
// to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			copyDir(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoveryAppliesWhatTheFileMissed: telemetry, archived events and a
// claim completion that are durable in the log but were not yet applied
// to the file when the process stopped (its files copied as a kill -9
// leaves them) are applied at Open.
func TestRecoveryAppliesWhatTheFileMissed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "live", "snavio.db")
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	s := openTest(t, Options{Path: path, Clock: clk, applyEvery: time.Hour})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	// The first apply runs at once; after it, nothing more is applied
	// for an hour.
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: delivered("first")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.awaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.Claim(ctx, flow.DedupeRecord{Tenant: "t", ID: "cmd", State: flow.ClaimInProgress, Owner: "o", ExpiresAt: now.Add(time.Minute)}, now); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := s.Deliver(ctx, Delivery{Queue: "q", Body: []byte("x"), Claim: &ClaimCompletion{ID: flow.ClaimKey("t", "cmd"), Owner: "o", ExpiresAt: now.Add(time.Hour), Now: now},
		Event: &OutboxEntry{Tenant: "t", Event: delivered("cmd")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: delivered("third")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: "ev", Source: "t/x", DetailType: "d", Detail: []byte("{}"), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	s.ap.mu.Lock()
	pending := len(s.ap.items)
	s.ap.mu.Unlock()
	if pending != 4 { // the claim completion, two events, the archived event
		t.Fatalf("%d items waiting to be applied, want 4", pending)
	}
	copyDir(t, filepath.Dir(path), filepath.Join(dir, "copy"))

	r := openTest(t, Options{Path: filepath.Join(dir, "copy", "snavio.db"), Clock: clk})
	recs, err := r.ReadTelemetry(ctx, "t", 0, 10)
	if err != nil || len(recs) != 3 || recs[2].Seq != 3 {
		t.Fatalf("telemetry after recovery: %d records, %v", len(recs), err)
	}
	if _, ok, err := r.ArchiveGet(ctx, "ev"); err != nil || !ok {
		t.Fatalf("archived event after recovery: %v %v", ok, err)
	}
	_, ex, err := r.Claim(ctx, flow.DedupeRecord{Tenant: "t", ID: "cmd", State: flow.ClaimInProgress, Owner: "o2", ExpiresAt: now.Add(time.Minute)}, now)
	if err != nil || ex.State != flow.ClaimDelivered {
		t.Fatalf("claim after recovery: %+v %v (the delivery's completion was not applied)", ex, err)
	}
	// The next append continues the stream without a gap.
	if seqs, err := r.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: delivered("fourth")}}); err != nil || seqs[0] != 4 {
		t.Fatalf("append after recovery: %v %v", seqs, err)
	}
}

// TestPageSize checks that a new file gets 16 KiB pages and that a file
// made with bbolt's default 4 KiB pages (every store before the change)
// opens, keeps its page size, and reads and takes writes as before.
func TestPageSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pageOf := func(s *Store) int { return s.db.Info().PageSize }

	fresh := openTest(t, Options{Path: filepath.Join(dir, "new.db")})
	if got := pageOf(fresh); got != pageSize {
		t.Fatalf("a new store's page size is %d, want %d", got, pageSize)
	}

	path := filepath.Join(dir, "old.db")
	old, err := Open(Options{Path: path, pageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	write := func(s *Store, i int) {
		t.Helper()
		if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: fmt.Sprintf("e%d", i), Source: "acme/billing", DetailType: "snavio.command-sent", Detail: detail("payments", "refund"), ReceivedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "acme", Event: delivered(fmt.Sprintf("c%d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		write(old, i)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, Options{Path: path})
	if got := pageOf(s); got != 4096 {
		t.Fatalf("reopened 4 KiB store has page size %d: a file must keep the page size it was made with", got)
	}
	for i := 50; i < 60; i++ {
		write(s, i)
	}
	recs, err := s.ReadTelemetry(ctx, "acme", 0, MaxReadPage)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 60 || recs[59].Seq != 60 {
		t.Fatalf("telemetry after reopen: %d records, want 60 numbered 1..60", len(recs))
	}
	for _, id := range []string{"e0", "e49", "e59"} {
		if _, ok, err := s.ArchiveGet(ctx, id); err != nil || !ok {
			t.Fatalf("archived %s after reopen: found %v, err %v", id, ok, err)
		}
	}
}

// TestSyncIntervalAcknowledgesOnceWritten: with a sync interval a write
// returns once it is in the log file, unsynced; the sync comes at the
// loop's tick, before anything is applied to the file, when a new segment
// is started and at Close. Nothing written is lost across Close.
func TestSyncIntervalAcknowledgesOnceWritten(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	ticks := make(chan time.Time)
	opts := Options{Path: path, SyncEvery: time.Hour, syncTicks: ticks, segmentBytes: 16 << 10}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Send(ctx, "q", []byte(fmt.Sprint("m", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.LogStats(); st.Writes < 1 || st.Syncs != 0 {
		t.Fatalf("log stats %+v: want the sends written and not synced", st)
	}
	if got := receiveAll(t, s, "q"); len(got) != 5 {
		t.Fatalf("received %d of 5 written messages", len(got))
	}
	// A tick syncs; the second send on the unbuffered channel returns
	// only once the loop is back from the first tick's sync.
	ticks <- time.Time{}
	ticks <- time.Time{}
	if st := s.LogStats(); st.Syncs != 1 || s.wal.Stats().Synced != s.wal.Stats().Last {
		t.Fatalf("log stats %+v, synced %d of %d frames: want one sync of everything", st, s.wal.Stats().Synced, s.wal.Stats().Last)
	}
	// The write-ahead rule: telemetry is applied to the file only once the
	// log holding it is synced.
	if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: "t", Reason: telemetry.DroppedQueueUnconsumed}}}); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.ReadTelemetry(ctx, "t", 0, MaxReadPage); err != nil || len(recs) != 1 {
		t.Fatalf("telemetry: %d records, %v", len(recs), err)
	}
	if applied, synced := s.ap.applied.Load(), s.wal.Stats().Synced; synced < applied {
		t.Fatalf("applied up to frame %d with the log synced up to %d", applied, synced)
	}
	// A new segment: the one before is synced first.
	syncs := s.LogStats().Syncs
	body := bytes.Repeat([]byte("x"), 1000)
	n := 0
	for ; s.LogStats().Segments < 3; n++ {
		if _, err := s.Send(ctx, "q", body, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.LogStats(); st.Syncs < syncs+2 {
		t.Fatalf("log stats %+v: two new segments, %d syncs before: want one sync each", st, syncs)
	}
	sent := s.wal.Stats().Last
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.wal.Stats().Synced != sent {
		t.Fatalf("closed with frames up to %d synced of %d", s.wal.Stats().Synced, sent)
	}
	s = openTest(t, opts)
	if _, err := s.ReleaseInFlight(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if got := receiveAll(t, s, "q"); len(got) != 5+n {
		t.Fatalf("after reopening: %d of %d messages", len(got), 5+n)
	}
}

// TestSyncIntervalFailureStopsWrites: a failed background sync refuses
// every later write, as a failed group sync does.
func TestSyncIntervalFailureStopsWrites(t *testing.T) {
	ctx := context.Background()
	disk := &failingDisk{}
	s, ticks := openTickedWithASend(t, time.Hour, disk)
	// The written frame's sync fails.
	disk.failed.Store(true)
	ticks <- time.Time{}
	ticks <- time.Time{}
	if _, err := s.Send(ctx, "q", []byte("b"), nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("send after a failed sync: %v", err)
	}
}

// TestSyncIntervalIsValidated: a negative interval is refused.
func TestSyncIntervalIsValidated(t *testing.T) {
	_, err := Open(Options{Path: filepath.Join(t.TempDir(), "snavio.db"), SyncEvery: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "sync interval -1s") {
		t.Fatalf("open with a negative sync interval: %v", err)
	}
}

// TestLogSyncsAreTimed: each sync of the log is timed by the store's
// clock, given to OnLogSync and summed in LogStats.SyncTime. The clock
// steps a millisecond at every reading, so each sync takes at least one.
func TestLogSyncsAreTimed(t *testing.T) {
	ctx := context.Background()
	var ticks atomic.Int64
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	clk := clock.Func(func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Millisecond) })
	var mu sync.Mutex
	var observed []time.Duration
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "snavio.db"), Clock: clk, OnLogSync: func(d time.Duration) {
		mu.Lock()
		observed = append(observed, d)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Send(ctx, "q", []byte(fmt.Sprint("m", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	st := s.LogStats()
	mu.Lock()
	defer mu.Unlock()
	if st.Syncs < 3 || uint64(len(observed)) != st.Syncs {
		t.Fatalf("%d syncs, %d observed: want one observation per sync, and a sync per acknowledged send", st.Syncs, len(observed))
	}
	var sum time.Duration
	for _, d := range observed {
		if d < time.Millisecond {
			t.Fatalf("a sync observed as %v: the clock stepped a millisecond between its readings", d)
		}
		sum += d
	}
	if st.SyncTime != sum {
		t.Fatalf("SyncTime %v, the observations sum to %v", st.SyncTime, sum)
	}
}

// TestMaintainReturnsWhenNothingCanMove: the upkeep returns when the
// oldest segment can be neither deleted (a read holds it here; during
// Close, the closing log) nor compacted (it holds no queued message). It
// used to compact nothing in a loop, and hung Close.
func TestMaintainReturnsWhenNothingCanMove(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), segmentBytes: 4 << 10})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	// A read in progress on the first segment, as msgRef.load holds one.
	first := s.wal.Segments()[0]
	first.Acquire()
	body := bytes.Repeat([]byte("x"), 1000)
	for i := range 40 {
		passThrough(t, s, body, i)
	}
	if n := len(s.wal.Sealed()); n <= walKeepSegments {
		t.Fatalf("%d sealed segments: the test needs more than %d behind the held one", n, walKeepSegments)
	}
	returned := make(chan struct{})
	go func() {
		s.maintain()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("maintain did not return: it loops on a segment it can neither delete nor compact")
	}
	// The read ends: the next upkeep deletes every sealed segment.
	first.Release()
	s.maintain()
	if st := s.LogStats(); st.Segments != 1 || st.UpkeepError != "" {
		t.Fatalf("log stats %+v: want only the active segment left", st)
	}
}

// TestSpareSegmentsAreReused: a deleted segment's file is kept as a spare
// (wal.SpareSegments at most) and becomes a later segment. A marker written
// far past the first segment's frames, where a small segment never
// writes, turns up under another name: the same file. It is looked for
// after every round, since a reused file is deleted for good once it is
// removed again with the spares full.
func TestSpareSegmentsAreReused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	s := openTest(t, Options{Path: path, segmentBytes: 4 << 10})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	const markAt = 1 << 20
	marker := []byte("snavio-spare-marker")
	first := s.wal.Segments()[0]
	firstFile, err := os.OpenFile(filepath.Join(path+walSuffix, first.Name()), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := firstFile.WriteAt(marker, markAt); err != nil {
		t.Fatal(err)
	}
	if err := firstFile.Close(); err != nil {
		t.Fatal(err)
	}
	// markedAs returns the name of the segment file, other than the
	// first segment's, that holds the marker ("" if none).
	markedAs := func() string {
		firsts, spares, err := wal.ListSegments(path + walSuffix)
		if err != nil {
			t.Fatal(err)
		}
		if len(spares) > wal.SpareSegments {
			t.Fatalf("spares %v: at most %d", spares, wal.SpareSegments)
		}
		for _, f := range firsts {
			p := filepath.Join(path+walSuffix, wal.SegmentName(f))
			if f == first.First() {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) { // renamed meanwhile
				t.Fatal(err)
			}
			if len(b) >= markAt+len(marker) && bytes.Equal(b[markAt:markAt+len(marker)], marker) {
				return filepath.Base(p)
			}
		}
		return ""
	}
	body := bytes.Repeat([]byte("x"), 1000)
	found := ""
	for i := 0; i < 60 && found == ""; i++ {
		passThrough(t, s, body, i)
		s.maintain()
		found = markedAs()
	}
	if found == "" {
		t.Fatal("the first segment's file never came back under another name: deleted segments are not reused")
	}
	if st := s.LogStats(); st.UpkeepError != "" {
		t.Fatalf("upkeep: %s", st.UpkeepError)
	}
	t.Logf("the first segment's file is now %s", found)
}

// staleFrame is a whole, valid frame with lsn, sending a message to queue
// q: what a spare file holds from its earlier life.
func staleFrame(t testing.TB, lsn uint64) []byte {
	f, _, err := localqueue.New(localqueue.Config{}).PrepareSend(context.Background(), "q", []byte("from an earlier life"), nil, time.Unix(0, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	return sealFrame(t, f, lsn)
}

// sealFrame returns f as the log writes it with lsn: written by a log of
// its own, and read back from its segment file.
func sealFrame(t testing.TB, f *frame, lsn uint64) []byte {
	t.Helper()
	dir := t.TempDir()
	w, err := wal.Open(wal.Config[localqueue.Changes]{Dir: dir, After: lsn - 1, OnCommitted: func([]*frame) {}})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(nil)
	g, err := w.Add(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := w.CloseFiles(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, wal.SegmentName(lsn)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// closedLogOfTenMessages sends ten 1000-byte messages to queue "q" of a
// store at path with 4 KiB segments, closes it, and returns its segments'
// first lsns: three at least.
func closedLogOfTenMessages(t *testing.T, path string) []uint64 {
	t.Helper()
	ctx := context.Background()
	s, err := Open(Options{Path: path, segmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1000)
	for range 10 {
		if _, err := s.Send(ctx, "q", body, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	firsts, _, err := wal.ListSegments(path + walSuffix)
	if err != nil || len(firsts) < 3 {
		t.Fatalf("segments %v, %v: the test needs three", firsts, err)
	}
	return firsts
}

// TestRecoveryIgnoresASpareFilesOldFrames: a segment made from a spare
// file holds, past its own frames, frames of its earlier life, whose lsns
// are below its first. Recovery stops at them, in the last segment (and
// cuts them) as in a sealed one whose next segment follows on; it refuses
// a sealed segment whose frames stop short of the next one's first.
func TestRecoveryIgnoresASpareFilesOldFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snavio.db")
	firsts := closedLogOfTenMessages(t, path)
	segPath := func(i int) string { return filepath.Join(path+walSuffix, wal.SegmentName(firsts[i])) }
	appendTo := func(p string, b []byte) int64 {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	last := segPath(len(firsts) - 1)
	lastSize := appendTo(last, staleFrame(t, 1))
	middleSize := appendTo(segPath(1), append(staleFrame(t, firsts[1]-1), staleFrame(t, 1)...))
	s := openTest(t, Options{Path: path, segmentBytes: 4 << 10})
	got := receiveAll(t, s, "q")
	if len(got) != 10 {
		t.Fatalf("%d messages after recovery, want the 10 sent", len(got))
	}
	for _, m := range got {
		if string(m.Body) != strings.Repeat("x", 1000) {
			t.Fatalf("an old frame was replayed: %q", m.Body)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(last); err != nil || fi.Size() != lastSize {
		t.Fatalf("the last segment's old frames not cut: %v bytes, want %d (%v)", fi.Size(), lastSize, err)
	}

	// A sealed segment whose frames stop before the next one's first
	// lost frames: refused.
	if err := os.Truncate(segPath(1), middleSize-1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Path: path}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("open over a sealed segment missing its last frame: %v", err)
	}
}

// TestSparesFoundAtOpenAreDeleted: a spare left by an earlier run may,
// after a power loss, hold frames of writes the log lost, with lsns the
// log reuses; Open deletes it rather than make a segment of it.
func TestSparesFoundAtOpenAreDeleted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	s, err := Open(Options{Path: path, segmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	next := s.wal.Stats().Last + 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var lost []byte
	for lsn := next; lsn < next+20; lsn++ {
		lost = append(lost, staleFrame(t, lsn)...)
	}
	spare := filepath.Join(path+walSuffix, wal.SegmentName(next)+wal.SpareSuffix)
	if err := os.WriteFile(spare, lost, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: path, segmentBytes: 4 << 10})
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spare found at Open is still there: %v", err)
	}
	if s.wal.Stats().Spares != 0 {
		t.Fatalf("%d spares to reuse after Open", s.wal.Stats().Spares)
	}
	if got := receiveAll(t, s, "q"); len(got) != 0 {
		t.Fatalf("the lost frames were read: %+v", got)
	}
}

// TestRecoveryCutsASealedSegmentTornBeforeItsEnd: the crash came after
// the next segment was made from a spare (old frames only) and before the
// last frames of the one before were written. That segment tears short of
// the next one's first: the log's end, cut like a torn last segment, and
// Open works again after more writes. With a frame in a later segment the
// same tear is damage (TestRecoveryIgnoresASpareFilesOldFrames).
func TestRecoveryCutsASealedSegmentTornBeforeItsEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snavio.db")
	opts := Options{Path: path, segmentBytes: 4 << 10}
	firsts := closedLogOfTenMessages(t, path)
	n := len(firsts)
	sealed := filepath.Join(path+walSuffix, wal.SegmentName(firsts[n-2]))
	b, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}
	// Its last frame unwritten (old bytes in its place), and the newest
	// segment holding only a spare's old frame.
	b = append(b[:len(b)-1], staleFrame(t, 1)...)
	if err := os.WriteFile(sealed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+walSuffix, wal.SegmentName(firsts[n-1])), staleFrame(t, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("open after a tear before the next segment's frames: %v", err)
	}
	before := receiveAll(t, s, "q")
	if len(before) == 0 || len(before) >= 10 {
		t.Fatalf("%d messages: want those before the tear only", len(before))
	}
	if _, err := s.ReleaseInFlight(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	id, err := s.Send(ctx, "q", []byte("after"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	after := receiveAll(t, s, "q")
	if len(after) != len(before)+1 || string(after[id].Body) != "after" {
		t.Fatalf("after a second restart: %d messages, want %d and the new one", len(after), len(before)+1)
	}
	for _, m := range after {
		if string(m.Body) == "from an earlier life" {
			t.Fatal("an old frame was replayed")
		}
	}
}

// TestSyncOnDemand: without a sync interval every write returns durable,
// except a queue consumer's receive, delete and visibility change, which
// return once written and are synced with the next write that waits for
// durability, or at the lazy sync's tick. A send is receivable only once
// synced.
func TestSyncOnDemand(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	ticks := make(chan time.Time)
	opts := Options{Path: path, syncTicks: ticks}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	durable := func(what string) {
		t.Helper()
		if synced, last := s.wal.Stats().Synced, s.wal.Stats().Last; synced != last {
			t.Fatalf("%s: synced up to frame %d of %d: want every frame durable", what, synced, last)
		}
	}
	for i := range 3 {
		if _, err := s.Send(ctx, "q", []byte(fmt.Sprint("m", i)), nil); err != nil {
			t.Fatal(err)
		}
		durable("after a send")
	}
	// A deferred send asks for no sync until its Wait, and its message is
	// not receivable before it is durable.
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "d"}); err != nil {
		t.Fatal(err)
	}
	dctx, d := DeferSync(ctx)
	if _, err := s.Send(dctx, "d", []byte("deferred"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Receive(ctx, "d", 10, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("before the deferred send's wait: received %d messages (%v), want none", len(got), err)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	durable("after a deferred send's wait")
	if got, err := s.Receive(ctx, "d", 10, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("after the deferred send's wait: received %d messages (%v), want it", len(got), err)
	}
	// That receive is unsynced: the tick below syncs it with the others.
	syncs := s.LogStats().Syncs
	got, err := s.Receive(ctx, "q", 3, time.Minute)
	if err != nil || len(got) != 3 {
		t.Fatalf("receive: %d messages, %v", len(got), err)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeMessageVisibility(ctx, "q", got[1].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	st := s.LogStats()
	if st.Syncs != syncs || s.wal.Stats().Synced >= s.wal.Stats().Last {
		t.Fatalf("log stats %+v (%d syncs before), synced %d of %d frames: want the consumer's writes written, not synced", st, syncs, s.wal.Stats().Synced, s.wal.Stats().Last)
	}
	// The lazy tick syncs them; the second send on the unbuffered channel
	// returns only once the loop is back from the first tick's sync.
	ticks <- time.Time{}
	ticks <- time.Time{}
	durable("after the tick")
	if st := s.LogStats(); st.Syncs != syncs+1 {
		t.Fatalf("log stats %+v: want one sync for the consumer's writes (%d before)", st, syncs)
	}
	// Unsynced consumer writes are synced by the next write that waits.
	if _, err := s.Receive(ctx, "q", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", []byte("m3"), nil); err != nil {
		t.Fatal(err)
	}
	durable("after a receive and a send")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close syncs an unsynced write too.
	s = openTest(t, opts)
	got, err = s.Receive(ctx, "q", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	last := s.wal.Stats().Last
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.wal.Stats().Synced != last {
		t.Fatalf("closed with frames up to %d synced of %d", s.wal.Stats().Synced, last)
	}
}

// TestSyncLoopSleepsWhileIdle: the sync loop arms its timer only once a
// write waits for it, syncs that write when the timer fires, and sleeps
// again: ticks while nothing is unsynced neither arm it nor sync.
func TestSyncLoopSleepsWhileIdle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"sync on demand", 0}, {"sync interval", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, ticks := openTickedWithASend(t, tc.every, &failingDisk{})
			// The send's round (a sync with an interval, nothing left on
			// demand), then a tick the loop takes asleep: each send on the
			// unbuffered channel returns once the loop has it.
			ticks <- time.Time{}
			ticks <- time.Time{}
			arms, syncs := s.wal.Stats().SyncArms, s.LogStats().Syncs
			if s.wal.Stats().Synced != s.wal.Stats().Last {
				t.Fatalf("synced %d of %d frames after the send's round", s.wal.Stats().Synced, s.wal.Stats().Last)
			}
			idle := func(when string) {
				t.Helper()
				for range 3 {
					ticks <- time.Time{}
				}
				if a, n := s.wal.Stats().SyncArms, s.LogStats().Syncs; a != arms || n != syncs {
					t.Fatalf("%s: %d arms and %d syncs, want %d and %d: the loop ran with nothing to sync", when, a, n, arms, syncs)
				}
			}
			idle("idle after the send")

			// A write that waits only for its write: a receive on demand,
			// a send with an interval.
			if tc.every == 0 {
				if got, err := s.Receive(ctx, "q", 1, time.Minute); err != nil || len(got) != 1 {
					t.Fatalf("receive: %v, %d messages", err, len(got))
				}
			} else if _, err := s.Send(ctx, "q", []byte("m2"), nil); err != nil {
				t.Fatal(err)
			}
			if s.wal.Stats().Synced >= s.wal.Stats().Last {
				t.Fatal("the write is synced before the loop's round")
			}
			ticks <- time.Time{} // the armed round: sync
			ticks <- time.Time{} // asleep again
			if a, n := s.wal.Stats().SyncArms, s.LogStats().Syncs; a != arms+1 || n != syncs+1 {
				t.Fatalf("after a write: %d arms and %d syncs, want %d and %d", a, n, arms+1, syncs+1)
			}
			if s.wal.Stats().Synced != s.wal.Stats().Last {
				t.Fatalf("synced %d of %d frames after the round", s.wal.Stats().Synced, s.wal.Stats().Last)
			}
			arms, syncs = arms+1, syncs+1
			idle("idle after the round")
		})
	}
}

// TestSyncOnDemandFailure: a group written and then failing its sync is
// not committed (its message never becomes receivable), its waiter gets
// ErrLogFailed, and every later write is refused.
func TestSyncOnDemandFailure(t *testing.T) {
	ctx := context.Background()
	disk := &failingDisk{}
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), syncTicks: make(chan time.Time), logIO: disk.io()})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", []byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Receive(ctx, "q", 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %d messages, %v", len(got), err)
	}
	dctx, d := DeferSync(ctx)
	if _, err := s.Send(dctx, "q", []byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	// Groups are written in order: once this consumer's write returns, the
	// deferred send's frame before it is written too, and not synced.
	if err := s.ChangeMessageVisibility(ctx, "q", got[0].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	// The sync fails.
	disk.failed.Store(true)
	if err := d.Wait(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("deferred send whose sync failed: %v", err)
	}
	// Only "a" is queued (a receive would be a write, refused now).
	stats, err := s.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Visible+stats[0].InFlight != 1 {
		t.Fatalf("queues after the failed sync: %+v: want only the first message, not the one whose sync failed", stats)
	}
	if _, err := s.Send(ctx, "q", []byte("c"), nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("send after a failed sync: %v", err)
	}
}

// failingDisk is a log disk that fails every write and sync once failed
// is set, as a failing disk would.
type failingDisk struct{ failed atomic.Bool }

func (d *failingDisk) io() *wal.IO {
	return &wal.IO{
		WriteAt: func(f *os.File, b []byte, off int64) (int, error) {
			if d.failed.Load() {
				return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
			}
			return f.WriteAt(b, off)
		},
		Datasync: func(f *os.File) error {
			if d.failed.Load() {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syscall.EIO}
			}
			return wal.Fdatasync(f)
		},
	}
}

// openTickedWithASend opens a file store whose sync loop runs on the
// returned ticks (every: its SyncEvery, 0 for sync on demand), with a
// queue "q" holding one sent message.
func openTickedWithASend(t *testing.T, every time.Duration, disk *failingDisk) (*Store, chan time.Time) {
	t.Helper()
	ctx := context.Background()
	ticks := make(chan time.Time)
	s := openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), SyncEvery: every, syncTicks: ticks, logIO: disk.io()})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", []byte("m"), nil); err != nil {
		t.Fatal(err)
	}
	return s, ticks
}
