package localqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

func TestMessageRecordRoundTrip(t *testing.T) {
	h := msgHeader{Seq: 7, VisibleAt: 11, SentAt: storecodec.Nanos(t0), FirstRecv: 13, ReceiveCount: 2, HasReceipt: true, Nonce: [nonceLen]byte{9, 8, 7}}
	m := Message{ID: "0b1e", Body: []byte("body\x00bytes"), Attributes: map[string]string{"a": "1", "": "", "long": strings.Repeat("v", 300)}}
	rec := encodeMsg(&h, &m)
	gh, gm, err := decodeMsg(rec)
	m.SentAt = t0
	if err != nil || gh != h || !reflect.DeepEqual(gm, m) {
		t.Fatalf("decodeMsg = %+v %+v %v, want %+v %+v", gh, gm, err, h, m)
	}
	if hh, id, err := decodeMsgHeader(rec); hh != h || id != "0b1e" || err != nil {
		t.Fatalf("decodeMsgHeader = %+v %q %v", hh, id, err)
	}
	h.Seq, h.HasReceipt = 99, false
	putHeader(rec, &h)
	if gh, _, _ := decodeMsg(rec); gh != h {
		t.Fatalf("after putHeader: %+v, want %+v", gh, h)
	}
	if _, m2, err := decodeMsg(encodeMsg(&h, &Message{ID: "x", Body: []byte("b")})); err != nil || m2.Attributes != nil {
		t.Fatalf("no attributes: %+v %v", m2, err)
	}
}

func TestQueueRecordRoundTrip(t *testing.T) {
	q := Queue{QueueConfig: QueueConfig{Name: "q", DeadLetterQueue: "d", MaxReceives: 5, VisibilityTimeout: 30 * time.Second, MaxDepth: 10}, ARN: QueueARN("q"), CreatedAt: t0}
	if got, err := decodeQueue(encodeQueue(&q)); got != q || err != nil {
		t.Fatalf("queue: %+v %v", got, err)
	}
}

func TestQueueDecodersRefuseDamage(t *testing.T) {
	h := msgHeader{SentAt: 1}
	msg := encodeMsg(&h, &Message{ID: "id", Body: []byte("b"), Attributes: map[string]string{"k": "v"}})
	q := Queue{QueueConfig: QueueConfig{Name: "q"}, CreatedAt: t0}
	decoders := map[string]struct {
		rec    []byte
		decode func([]byte) error
	}{
		"message": {msg, func(b []byte) error { _, _, err := decodeMsg(b); return err }},
		"queue":   {encodeQueue(&q), func(b []byte) error { _, err := decodeQueue(b); return err }},
	}
	for name, d := range decoders {
		if err := d.decode(d.rec); err != nil {
			t.Fatalf("%s: intact record refused: %v", name, err)
		}
		next := bytes.Clone(d.rec)
		next[0] = 2
		if err := d.decode(next); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", next[0])) {
			t.Errorf("%s: version %d record: %v", name, next[0], err)
		}
		// Every truncation before the last field's start is refused.
		if err := d.decode(d.rec[:len(d.rec)/2]); err == nil && name != "message" {
			t.Errorf("%s: half a record accepted", name)
		}
		if err := d.decode(nil); err == nil {
			t.Errorf("%s: empty record accepted", name)
		}
	}
	if _, _, err := decodeMsg(msg[:msgHeaderLen+2]); err == nil {
		t.Error("message cut inside its id accepted")
	}
}

// FuzzDecodeQueueRecords: no decoder panics on any input; whatever the
// message decoder accepts re-encodes to a record that decodes to the
// same.
func FuzzDecodeQueueRecords(f *testing.F) {
	h := msgHeader{Seq: 1, SentAt: 2, HasReceipt: true}
	f.Add(encodeMsg(&h, &Message{ID: "id", Body: []byte("b"), Attributes: map[string]string{"k": "v"}}))
	f.Add(encodeQueue(&Queue{QueueConfig: QueueConfig{Name: "q", DeadLetterQueue: "d"}}))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = decodeMsgHeader(b)
		_, _ = decodeQueue(b)
		h, m, err := decodeMsg(b)
		if err != nil {
			return
		}
		h2, m2, err := decodeMsg(encodeMsg(&h, &m))
		if err != nil || h2 != h || m2.ID != m.ID || !bytes.Equal(m2.Body, m.Body) || len(m2.Attributes) != len(m.Attributes) {
			t.Fatalf("re-encoded %+v %+v: %+v %+v %v", h, m, h2, m2, err)
		}
	})
}

func TestDeleteMessageBatch(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, QueueConfig{Name: "q"})
	for _, b := range []string{"a", "b", "c"} {
		if _, err := s.Send(ctx, "q", []byte(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Receive(ctx, "q", 10, time.Second)
	if err != nil || len(got) != 3 {
		t.Fatalf("receive: %d %v", len(got), err)
	}
	// c's handle goes stale: received again after its visibility timeout.
	clk.Advance(2 * time.Second)
	again, err := s.Receive(ctx, "q", 10, time.Minute)
	if err != nil || len(again) != 3 {
		t.Fatalf("receive again: %d %v", len(again), err)
	}
	errs, err := s.DeleteMessageBatch(ctx, "q", []string{again[0].ReceiptHandle, "garbage", got[2].ReceiptHandle, again[1].ReceiptHandle})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[3] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "malformed") || !errors.Is(errs[2], ErrStaleReceipt) {
		t.Fatalf("errs %v", errs)
	}
	qs, _ := s.ListQueues(ctx)
	if qs[0].Visible+qs[0].InFlight != 1 {
		t.Fatalf("left %+v, want 1 message", qs[0])
	}
	// The same handle twice: the second is stale.
	errs, _ = s.DeleteMessageBatch(ctx, "q", []string{again[2].ReceiptHandle, again[2].ReceiptHandle})
	if errs[0] != nil || !errors.Is(errs[1], ErrStaleReceipt) {
		t.Fatalf("duplicate handle: %v", errs)
	}
	for _, tc := range []struct {
		queue    string
		receipts []string
		want     string
	}{
		{"q", nil, "give 1 to 10"},
		{"q", make([]string, 11), "give 1 to 10"},
		{"nope", []string{again[0].ReceiptHandle}, "create it first"},
	} {
		if _, err := s.DeleteMessageBatch(ctx, tc.queue, tc.receipts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DeleteMessageBatch(%s, %d handles) = %v, want %q", tc.queue, len(tc.receipts), err, tc.want)
		}
	}
}

func TestMessageIDsAreTimeOrderedUUIDs(t *testing.T) {
	var prev string
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		clk := clock.NewFake(now)
		s := openQueues(t, clk, false)
		if _, err := s.CreateQueue(context.Background(), QueueConfig{Name: "q"}); err != nil {
			t.Fatal(err)
		}
		id, err := s.Send(context.Background(), "q", []byte("m"), nil)
		if err != nil {
			t.Fatal(err)
		}
		// xxxxxxxx-xxxx-7xxx-[89ab]xxx-xxxxxxxxxxxx, the first 48 bits the
		// Unix milliseconds.
		if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("id %s is not a UUID version 7", id)
		}
		if ms := fmt.Sprintf("%012x", now.UnixMilli()); id[:8]+id[9:13] != ms {
			t.Fatalf("id %s does not start with %s", id, ms)
		}
		if id <= prev {
			t.Fatalf("%s after %s", id, prev)
		}
		prev = id
	}
}
