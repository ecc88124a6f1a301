package embedded

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

func delivered(id string) telemetry.Event {
	return telemetry.Delivered{CommandID: id, Source: "acme/billing", Target: "t", CommandName: "c", Path: telemetry.PathFast}
}

func appendN(t *testing.T, s *Store, tenant string, n int) []uint64 {
	t.Helper()
	var entries []OutboxEntry
	for i := range n {
		entries = append(entries, OutboxEntry{Tenant: tenant, Event: delivered(fmt.Sprintf("%s-%d", tenant, i))})
	}
	seqs, err := s.AppendTelemetry(context.Background(), entries)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

func TestOutboxAppendReadAck(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	if seqs := appendN(t, s, "acme", 3); fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatalf("seqs %v", seqs)
	}
	clk.Advance(time.Second)
	appendN(t, s, "zeta", 1)
	if seqs := appendN(t, s, "acme", 2); fmt.Sprint(seqs) != "[4 5]" {
		t.Fatalf("seqs %v", seqs)
	}
	recs, err := s.ReadTelemetry(ctx, "acme", 2, 2)
	if err != nil || len(recs) != 2 || recs[0].Seq != 3 || recs[1].Seq != 4 || recs[0].Tenant != "acme" {
		t.Fatalf("read after 2: %+v %v", recs, err)
	}
	ev, err := recs[1].Decode()
	if err != nil || ev.(telemetry.Delivered).CommandID != "acme-0" || recs[1].Name != telemetry.NameDelivered || !recs[1].AppendedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("record 4 = %+v (%v)", ev, err)
	}
	if recs, _ := s.ReadTelemetry(ctx, "nobody", 0, 10); len(recs) != 0 {
		t.Fatalf("unknown tenant read %+v", recs)
	}
	all, err := s.ReadAllTelemetry(ctx, 0, 100)
	if err != nil || len(all) != 6 {
		t.Fatalf("read all: %d %v", len(all), err)
	}
	var order []string
	for _, r := range all {
		order = append(order, fmt.Sprintf("%s#%d", r.Tenant, r.Seq))
	}
	if got := strings.Join(order, " "); got != "acme#1 acme#2 acme#3 zeta#1 acme#4 acme#5" {
		t.Fatalf("operator order %s", got)
	}
	if page, _ := s.ReadAllTelemetry(ctx, all[3].Global, 1); len(page) != 1 || page[0].Tenant != "acme" || page[0].Seq != 4 {
		t.Fatalf("read all after %d: %+v", all[3].Global, page)
	}
	// Cursor.
	if err := s.AckTelemetry(ctx, "acme", 9); err == nil || !strings.Contains(err.Error(), "ends at 5") {
		t.Fatalf("ack past the end: %v", err)
	}
	if err := s.AckTelemetry(ctx, "nobody", 1); err == nil {
		t.Fatal("ack of an unknown tenant accepted")
	}
	clk.Advance(time.Second)
	if err := s.AckTelemetry(ctx, "acme", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.AckTelemetry(ctx, "acme", 1); err != nil {
		t.Fatal(err)
	}
	streams, _ := s.TelemetryStreams(ctx)
	a := streams[0]
	if a.Tenant != "acme" || a.LastSeq != 5 || a.Cursor != 3 || a.Stored != 5 || a.Unconsumed != 2 || !a.LastAckAt.Equal(t0.Add(2*time.Second)) ||
		!a.Oldest.Equal(t0) || !a.OldestUnconsumed.Equal(t0.Add(time.Second)) {
		t.Fatalf("acme stream %+v", a)
	}
	if z := streams[1]; z.Unconsumed != 1 || !z.LastAckAt.IsZero() {
		t.Fatalf("zeta stream %+v", z)
	}
}

func TestOutboxLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no entries", func() error { _, err := s.AppendTelemetry(ctx, nil); return err }(), "give 1 to 1000"},
		{"too many", func() error { _, err := s.AppendTelemetry(ctx, make([]OutboxEntry, MaxAppendBatch+1)); return err }(), "give 1 to 1000"},
		{"no tenant", func() error {
			_, err := s.AppendTelemetry(ctx, []OutboxEntry{{Event: delivered("x")}})
			return err
		}(), "tenant"},
		{"nil event", func() error { _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "a"}}); return err }(), "nil event"},
		{"page 0", func() error { _, err := s.ReadTelemetry(ctx, "a", 0, 0); return err }(), "limit 0 outside 1..1000"},
		{"page too big", func() error { _, err := s.ReadAllTelemetry(ctx, 0, MaxReadPage+1); return err }(), "outside 1..1000"},
		{"retention", func() error { _, _, err := s.PurgeTelemetry(ctx, 0, 10); return err }(), "retention"},
		{"purge limit", func() error { _, _, err := s.PurgeTelemetry(ctx, time.Hour, 0); return err }(), "limit 0"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

func TestOutboxRetentionReportsUnconsumed(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	const retention = 14 * 24 * time.Hour
	appendN(t, s, "acme", 4) // t0: seqs 1-4
	appendN(t, s, "calm", 2) // t0: consumed below
	appendN(t, s, "idle", 1)
	clk.Advance(time.Hour)
	if err := s.AckTelemetry(ctx, "acme", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.AckTelemetry(ctx, "calm", 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	appendN(t, s, "acme", 1) // t0+25h: seq 5, younger than the cutoff
	if d, n, err := s.PurgeTelemetry(ctx, retention, 100); err != nil || n != 0 || len(d) != 0 {
		t.Fatalf("purge before retention: %v %d %v", d, n, err)
	}
	clk.Set(t0.Add(retention + 2*time.Hour))
	// A small limit deletes oldest first and says so by deleted == limit.
	d, n, err := s.PurgeTelemetry(ctx, retention, 2)
	if err != nil || n != 2 {
		t.Fatalf("first pass: %v %d %v", d, n, err)
	}
	if len(d) != 1 || d[0].Tenant != "acme" || d[0].DroppedEvents != 1 {
		t.Fatalf("first pass dropped %+v: seq 1 was consumed, seq 2 was not", d)
	}
	d2, n2, err := s.PurgeTelemetry(ctx, retention, 100)
	if err != nil || n2 != 5 {
		t.Fatalf("second pass: %v %d %v", d2, n2, err)
	}
	want := []telemetry.Dropped{
		{Tenant: "acme", DroppedEvents: 2, Reason: "queue_unconsumed", QueueAgeSeconds: int64((retention + 2*time.Hour) / time.Second), LastReceivedAt: t0.Add(time.Hour)},
		{Tenant: "idle", DroppedEvents: 1, Reason: "queue_unconsumed", QueueAgeSeconds: int64((retention + 2*time.Hour) / time.Second)},
	}
	if fmt.Sprint(d2) != fmt.Sprint(want) {
		t.Fatalf("dropped\n got %+v\nwant %+v", d2, want)
	}
	recs, _ := s.ReadTelemetry(ctx, "acme", 0, 10)
	if len(recs) != 1 || recs[0].Seq != 5 {
		t.Fatalf("acme keeps %+v, want only seq 5", recs)
	}
	if all, _ := s.ReadAllTelemetry(ctx, 0, 100); len(all) != 1 {
		t.Fatalf("operator view keeps %d records, want 1", len(all))
	}
	// Sequence numbers continue after a purge: no reuse, no gap.
	if seqs := appendN(t, s, "idle", 1); seqs[0] != 2 {
		t.Fatalf("idle's next seq %d, want 2", seqs[0])
	}
}

// Concurrent appenders to one tenant get distinct, gap-free sequence
// numbers, and each appender's own events keep its order.
func TestOutboxConcurrentAppendsAreOrdered(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "acme", Event: delivered(fmt.Sprintf("%d-%03d", w, i))}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	last := map[string]string{}
	var after uint64
	total := 0
	for {
		recs, err := s.ReadTelemetry(ctx, "acme", after, MaxReadPage)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Seq != after+1 {
				t.Fatalf("seq %d after %d", r.Seq, after)
			}
			after = r.Seq
			ev, _ := r.Decode()
			w, i, _ := strings.Cut(ev.(telemetry.Delivered).CommandID, "-")
			if i <= last[w] {
				t.Fatalf("writer %s: event %s after %s", w, i, last[w])
			}
			last[w] = i
			total++
		}
	}
	if total != writers*each {
		t.Fatalf("%d records, want %d", total, writers*each)
	}
}

// TestScanAllTelemetrySkipsByName: the scan returns only the records whose
// name is kept, decoded, and says how far it examined, so a reader of a
// few kinds of event moves past the rest without decoding them.
func TestScanAllTelemetrySkipsByName(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{Ephemeral: true})
	var entries []OutboxEntry
	for i := range 7 {
		var ev telemetry.Event = delivered(fmt.Sprint(i))
		if i%3 == 0 {
			ev = telemetry.Dropped{Tenant: "acme", Reason: telemetry.DroppedQueueUnconsumed, DroppedEvents: int64(i)}
		}
		entries = append(entries, OutboxEntry{Tenant: "acme", Event: ev})
	}
	if _, err := s.AppendTelemetry(ctx, entries); err != nil {
		t.Fatal(err)
	}
	keep := func(name string) bool { return name == telemetry.NameDropped }
	got, last, err := s.ScanAllTelemetry(ctx, 0, 5, keep)
	if err != nil || last != 5 || len(got) != 2 || got[0].Global != 1 || got[1].Global != 4 {
		t.Fatalf("first page: %d records (%+v), last %d, %v", len(got), got, last, err)
	}
	if ev, err := got[1].Decode(); err != nil || ev.(telemetry.Dropped).DroppedEvents != 3 {
		t.Fatalf("record 4 decodes to %+v, %v", ev, err)
	}
	got, last, err = s.ScanAllTelemetry(ctx, last, 5, keep)
	if err != nil || last != 7 || len(got) != 1 || got[0].Global != 7 {
		t.Fatalf("second page: %+v, last %d, %v", got, last, err)
	}
	if got, last, err = s.ScanAllTelemetry(ctx, last, 5, keep); err != nil || last != 7 || len(got) != 0 {
		t.Fatalf("at the end: %+v, last %d, %v", got, last, err)
	}
	if _, _, err := s.ScanAllTelemetry(ctx, 0, 0, keep); err == nil {
		t.Fatal("limit 0 accepted")
	}
}
