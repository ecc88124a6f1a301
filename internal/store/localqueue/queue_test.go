package localqueue

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// openQueues returns queues over a store file and a write-ahead log in a
// temporary directory (an ephemeral log unless file), as the embedded
// store composes them.
func openQueues(t *testing.T, clk clock.Clock, file bool) *Queues {
	t.Helper()
	qs, _ := openQueuesAt(t, t.TempDir(), clk, file)
	return qs
}

// openQueuesAt opens queues whose store file and log are in dir, and
// returns them with the function that closes them (called at the end of
// the test too).
func openQueuesAt(t testing.TB, dir string, clk clock.Clock, file bool) (*Queues, func() error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "queues.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(Bucket); return err }); err != nil {
		t.Fatal(err)
	}
	qs := New(Config{Clock: clk, MemoryBudget: 64 << 20, Update: func(ctx context.Context, fn func(*bolt.Tx) error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return db.Update(fn)
	}})
	if err := db.View(qs.Load); err != nil {
		t.Fatal(err)
	}
	cfg := wal.Config[Changes]{OnCommitted: qs.Committed, Replay: func(seg *wal.Segment, lsn uint64, ops []wal.Op) (bool, error) {
		for _, op := range ops {
			if err := qs.Replay(seg, lsn, op); err != nil {
				return false, err
			}
		}
		return false, nil
	}}
	if file {
		cfg.Dir = filepath.Join(dir, "wal")
	}
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	qs.Start(w)
	w.Start(nil)
	var once sync.Once
	var cerr error
	closeAll := func() error {
		once.Do(func() {
			qs.Close()
			w.Close()
			cerr = errors.Join(w.CloseFiles(), db.Close())
		})
		return cerr
	}
	t.Cleanup(func() {
		if err := closeAll(); err != nil {
			t.Error(err)
		}
	})
	return qs, closeAll
}

// fakeStore returns ephemeral queues on a fake clock.
func fakeStore(t *testing.T) (*Queues, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	return openQueues(t, clk, false), clk
}

func mustQueue(t *testing.T, s *Queues, cfg QueueConfig) Queue {
	t.Helper()
	q, err := s.CreateQueue(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestQueueNamesAndConfigs(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "dlq"})
	tests := []struct {
		name string
		cfg  QueueConfig
		want string // substring of the error; "" for success
	}{
		{"fifo refused", QueueConfig{Name: "orders.fifo"}, "FIFO queues are not supported"},
		{"empty name", QueueConfig{Name: ""}, "must be 1 to 80"},
		{"long name", QueueConfig{Name: strings.Repeat("a", 81)}, "must be 1 to 80"},
		{"bad character", QueueConfig{Name: "a/b"}, `character '/' not allowed`},
		{"missing dlq", QueueConfig{Name: "q1", DeadLetterQueue: "nope", MaxReceives: 3}, "create it first"},
		{"dlq without max receives", QueueConfig{Name: "q1", DeadLetterQueue: "dlq"}, "max receives 0 outside 1..1000"},
		{"max receives without dlq", QueueConfig{Name: "q1", MaxReceives: 2}, "set both or neither"},
		{"own dlq", QueueConfig{Name: "q1", DeadLetterQueue: "q1", MaxReceives: 1}, "its own dead-letter queue"},
		{"visibility too long", QueueConfig{Name: "q1", VisibilityTimeout: 13 * time.Hour}, "visibility timeout"},
		{"fifo dlq", QueueConfig{Name: "q1", DeadLetterQueue: "d.fifo", MaxReceives: 1}, "FIFO"},
		{"ok", QueueConfig{Name: "q1", DeadLetterQueue: "dlq", MaxReceives: 3}, ""},
		{"same config again is idempotent", QueueConfig{Name: "q1", DeadLetterQueue: "dlq", MaxReceives: 3, VisibilityTimeout: DefaultVisibilityTimeout}, ""},
		{"different config", QueueConfig{Name: "q1", DeadLetterQueue: "dlq", MaxReceives: 4}, "different configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateQueue(ctx, tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	q, err := s.GetQueue(ctx, "q1")
	if err != nil || q.ARN != "arn:snavio:sqs:local:000000000000:q1" || q.MaxDepth != DefaultMaxDepth {
		t.Fatalf("GetQueue = %+v, %v", q, err)
	}
	if _, err := s.GetQueue(ctx, "nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("GetQueue(nope) = %v", err)
	}
}

func TestQueueARN(t *testing.T) {
	for _, tc := range []struct {
		arn, name string
		ok        bool
	}{
		{"arn:snavio:sqs:local:000000000000:orders", "orders", true},
		{"arn:aws:sqs:us-east-1:123456789012:orders", "", false},
		{"arn:snavio:sqs:local:000000000000:", "", false},
		{"arn:snavio:sqs:local:000000000000:o.fifo", "", false},
	} {
		name, err := ParseQueueARN(tc.arn)
		if (err == nil) != tc.ok || name != tc.name {
			t.Errorf("ParseQueueARN(%q) = %q, %v", tc.arn, name, err)
		}
	}
	if n, _ := ParseQueueARN(QueueARN("x_y-1")); n != "x_y-1" {
		t.Fatal("QueueARN does not round trip")
	}
}

func TestSendReceiveDelete(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "q", VisibilityTimeout: 10 * time.Second})
	var ids []string
	for i := range 3 {
		id, err := s.Send(ctx, "q", []byte(fmt.Sprintf("m%d", i)), map[string]string{"i": fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		clk.Advance(time.Millisecond)
	}
	got, err := s.Receive(ctx, "q", 2, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %v %v", got, err)
	}
	if got[0].ID != ids[0] || string(got[0].Body) != "m0" || got[0].Attributes["i"] != "0" || got[0].ReceiveCount != 1 || got[1].ID != ids[1] {
		t.Fatalf("received %+v", got)
	}
	// The two are in flight; one is left.
	rest, _ := s.Receive(ctx, "q", 10, 0)
	if len(rest) != 1 || rest[0].ID != ids[2] {
		t.Fatalf("second receive: %+v", rest)
	}
	if none, _ := s.Receive(ctx, "q", 10, 0); len(none) != 0 {
		t.Fatalf("in-flight messages were returned: %+v", none)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMessage(ctx, "q", got[0].ReceiptHandle); !errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("second delete: %v, want ErrStaleReceipt", err)
	}
	// After the visibility timeout the undeleted ones come back, counted.
	clk.Advance(10 * time.Second)
	again, _ := s.Receive(ctx, "q", 10, time.Minute)
	if len(again) != 2 || again[0].ID != ids[1] || again[0].ReceiveCount != 2 || !again[0].FirstReceivedAt.Equal(t0.Add(3*time.Millisecond)) {
		t.Fatalf("after visibility timeout: %+v", again)
	}
	// The first receive's handle is stale now, the second's is good.
	if err := s.DeleteMessage(ctx, "q", got[1].ReceiptHandle); !errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("stale handle: %v", err)
	}
	if err := s.DeleteMessage(ctx, "q", again[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	stats, _ := s.ListQueues(ctx)
	if len(stats) != 1 || stats[0].Visible != 0 || stats[0].InFlight != 1 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestReceiveBoundsAndErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "q", MaxDepth: 2})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"max 0", func() error { _, err := s.Receive(ctx, "q", 0, 0); return err }(), "max 0 outside 1..10"},
		{"max 11", func() error { _, err := s.Receive(ctx, "q", 11, 0); return err }(), "max 11 outside 1..10"},
		{"negative visibility", func() error { _, err := s.Receive(ctx, "q", 1, -1); return err }(), "visibility timeout"},
		{"missing queue", func() error { _, err := s.Receive(ctx, "nope", 1, 0); return err }(), "does not exist"},
		{"empty body", func() error { _, err := s.Send(ctx, "q", nil, nil); return err }(), "empty body"},
		{"big body", func() error { _, err := s.Send(ctx, "q", make([]byte, MaxMessageBytes+1), nil); return err }(), "over the limit"},
		{"send to missing", func() error { _, err := s.Send(ctx, "nope", []byte("x"), nil); return err }(), "does not exist"},
		{"bad receipt", s.DeleteMessage(ctx, "q", "garbage"), "malformed"},
		{"purge missing", func() error { _, err := s.PurgeQueue(ctx, "nope"); return err }(), "does not exist"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	for range 2 {
		if _, err := s.Send(ctx, "q", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Send(ctx, "q", []byte("x"), nil); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("send to a full queue: %v", err)
	}
	if n, err := s.PurgeQueue(ctx, "q"); n != 2 || err != nil {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if _, err := s.Send(ctx, "q", []byte("x"), nil); err != nil {
		t.Fatalf("send after purge: %v", err)
	}
}

func TestRedriveToDLQ(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "dlq"})
	q := mustQueue(t, s, QueueConfig{Name: "q", DeadLetterQueue: "dlq", MaxReceives: 2, VisibilityTimeout: time.Second})
	id, _ := s.Send(ctx, "q", []byte("poison"), map[string]string{"k": "v"})
	for i := 1; i <= 2; i++ {
		got, _ := s.Receive(ctx, "q", 1, 0)
		if len(got) != 1 || got[0].ReceiveCount != i {
			t.Fatalf("receive %d: %+v", i, got)
		}
		clk.Advance(time.Second)
	}
	// The third receive moves it instead of returning it.
	if got, _ := s.Receive(ctx, "q", 1, 0); len(got) != 0 {
		t.Fatalf("a message over max receives was returned: %+v", got)
	}
	got, _ := s.Receive(ctx, "dlq", 10, 0)
	if len(got) != 1 {
		t.Fatalf("dlq has %d messages", len(got))
	}
	m := got[0]
	if m.ID != id || string(m.Body) != "poison" || m.Attributes["k"] != "v" ||
		m.Attributes[AttrDLQReason] != DLQReasonMaxReceives || m.Attributes[AttrDLQSourceQueue] != q.ARN || m.Attributes[AttrDLQReceiveCount] != "2" || !m.SentAt.Equal(t0) {
		t.Fatalf("dlq message %+v", m)
	}
	stats, _ := s.ListQueues(ctx)
	if stats[0].Name != "dlq" || stats[0].InFlight != 1 || stats[1].Visible != 0 || stats[1].InFlight != 0 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestListQueuesAge(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "a"})
	mustQueue(t, s, QueueConfig{Name: "b"})
	s.Send(ctx, "a", []byte("1"), nil)
	clk.Advance(time.Minute)
	s.Send(ctx, "a", []byte("2"), nil)
	s.Receive(ctx, "a", 1, 0)
	clk.Advance(10 * time.Second)
	stats, err := s.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, b := stats[0], stats[1]
	if a.Visible != 1 || a.InFlight != 1 || a.OldestAge != 70*time.Second {
		t.Fatalf("a = %+v", a)
	}
	if b.Visible != 0 || b.InFlight != 0 || b.OldestAge != 0 {
		t.Fatalf("b = %+v", b)
	}
}

// Concurrent receivers never get the same message while it is invisible,
// and every message is received exactly once when all delete.
func TestConcurrentReceivers(t *testing.T) {
	ctx := context.Background()
	s := openQueues(t, clock.NewFake(t0), true)
	mustQueue(t, s, QueueConfig{Name: "q"})
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Send(ctx, "q", []byte(fmt.Sprint(i)), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var mu sync.Mutex
	seen := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.Receive(ctx, "q", 10, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, m := range got {
					mu.Lock()
					seen[m.ID]++
					mu.Unlock()
					if err := s.DeleteMessage(ctx, "q", m.ReceiptHandle); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("received %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %s received %d times within its visibility timeout", id, c)
		}
	}
}

func TestParseReceipt(t *testing.T) {
	nonce := [nonceLen]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	h := receiptOf("abc", nonce)
	if id, n, err := parseReceipt(h); id != "abc" || n != nonce || err != nil {
		t.Fatalf("parseReceipt(%q) = %q, %x, %v", h, id, n, err)
	}
	for _, bad := range []string{"", "r1.", "r1.abc", "r1..00112233445566778899aabb", "r2.abc.00112233445566778899aabb", "r1.abc.zz112233445566778899aabb"} {
		if _, _, err := parseReceipt(bad); err == nil {
			t.Errorf("parseReceipt(%q) accepted", bad)
		}
	}
}

// FuzzParseReceipt: never panics; an accepted handle names a non-empty id
// and re-encodes to itself (up to the nonce's hex case).
func FuzzParseReceipt(f *testing.F) {
	f.Add("r1.0b1e-4c.00112233445566778899aabb")
	f.Add("r1..")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, h string) {
		id, nonce, err := parseReceipt(h)
		if err != nil {
			return
		}
		if id == "" || !strings.EqualFold(receiptOf(id, nonce), h) {
			t.Fatalf("parseReceipt(%q) = %q, %x", h, id, nonce)
		}
	})
}

// FuzzParseQueueARN: never panics; an accepted ARN round trips.
func FuzzParseQueueARN(f *testing.F) {
	f.Add("arn:snavio:sqs:local:000000000000:orders")
	f.Add("arn:snavio:sqs:local:000000000000:o.fifo")
	f.Add("arn:aws:sqs:us-east-1:1:x")
	f.Fuzz(func(t *testing.T, arn string) {
		name, err := ParseQueueARN(arn)
		if err != nil {
			return
		}
		if QueueARN(name) != arn || checkQueueName(name) != nil {
			t.Fatalf("ParseQueueARN(%q) = %q", arn, name)
		}
	})
}

func TestReleaseInFlight(t *testing.T) {
	s, clk := fakeStore(t)
	ctx := context.Background()
	if _, err := s.CreateQueue(ctx, QueueConfig{Name: "h"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Send(ctx, "h", []byte{byte('a' + i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Receive(ctx, "h", 2, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %d, %v", len(got), err)
	}
	n, err := s.ReleaseInFlight(ctx, "h")
	if err != nil || n != 2 {
		t.Fatalf("released %d, %v; want 2", n, err)
	}
	// Visible at once, not after the minute; the old receipts are stale.
	again, err := s.Receive(ctx, "h", 10, time.Minute)
	if err != nil || len(again) != 3 {
		t.Fatalf("after release: %d messages, %v; want all 3", len(again), err)
	}
	if err := s.DeleteMessage(ctx, "h", got[0].ReceiptHandle); !errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("old receipt: %v; want ErrStaleReceipt", err)
	}
	for _, m := range again {
		if m.Body[0] == got[0].Body[0] && m.ReceiveCount != 2 {
			t.Fatalf("receive count of a released message = %d; want 2 (releasing is not a receive)", m.ReceiveCount)
		}
	}
	clk.Advance(time.Second)
	if n, err := s.ReleaseInFlight(ctx, "nope"); n != 0 || !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("unknown queue: %d, %v", n, err)
	}
}

// ChangeMessageVisibility gives a received message back before its
// visibility timeout; a stale handle changes nothing.
func TestChangeMessageVisibility(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "q"})
	if _, err := s.Send(ctx, "q", []byte("m"), nil); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Receive(ctx, "q", 1, time.Hour)
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	if err := s.ChangeMessageVisibility(ctx, "q", got[0].ReceiptHandle, time.Second); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Receive(ctx, "q", 1, time.Hour); len(again) != 0 {
		t.Fatal("visible before its new visibility")
	}
	clk.Advance(time.Second)
	again, _ := s.Receive(ctx, "q", 1, time.Hour)
	if len(again) != 1 || again[0].ReceiveCount != 2 {
		t.Fatalf("after the new visibility: %+v", again)
	}
	// The first receive's handle is stale now.
	if err := s.ChangeMessageVisibility(ctx, "q", got[0].ReceiptHandle, 0); !errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("stale handle: %v", err)
	}
	for _, bad := range []struct {
		queue, receipt string
		vis            time.Duration
	}{
		{"q", again[0].ReceiptHandle, -time.Second},
		{"q", again[0].ReceiptHandle, 13 * time.Hour},
		{"q", "not-a-receipt", 0},
		{"nope", again[0].ReceiptHandle, 0},
	} {
		if err := s.ChangeMessageVisibility(ctx, bad.queue, bad.receipt, bad.vis); err == nil {
			t.Errorf("ChangeMessageVisibility(%q, %q, %v) accepted", bad.queue, bad.receipt, bad.vis)
		}
	}
}
