package devserver

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

const benchQueue = "bench-orders"

// benchStore is an in-memory store with benchQueue, as serve --ephemeral
// runs.
func benchStore(tb testing.TB, clk clock.Clock) *embedded.Store {
	tb.Helper()
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if _, err := st.CreateQueue(context.Background(), localqueue.QueueConfig{Name: benchQueue, MaxDepth: localqueue.MaxMaxDepth}); err != nil {
		tb.Fatal(err)
	}
	return st
}

// benchDelivery is a 1 KiB-payload command as the dispatcher hands it to
// the sender, with its delivered event.
func benchDelivery() *dispatch.Delivery {
	body := []byte(`{"metadata":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","timestamp":"2026-11-25T21:00:00.000Z","version_id":"hmac-v1","hmac":"` +
		string(bytes.Repeat([]byte("a"), 64)) + `"},"command":{"source":"demo/app","target":"orders","name":"create","payload":{"data":"` +
		string(bytes.Repeat([]byte("x"), 1012)) + `"}}}`)
	return &dispatch.Delivery{
		QueueARN: embedded.QueueARN(benchQueue), Body: body,
		CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: "demo/app", Target: "orders", Command: "create",
		Event: telemetry.Delivered{CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: "demo/app", Target: "orders",
			CommandName: "create", Timestamp: "2026-11-25T21:00:00.000Z", Path: telemetry.PathFast},
	}
}

// purgeEvery empties benchQueue every n iterations with the timer stopped,
// so that a long run measures a queue of steady size.
func purgeEvery(b *testing.B, st *embedded.Store, i, n int) {
	if i%n != 0 {
		return
	}
	b.StopTimer()
	if _, err := st.PurgeQueue(context.Background(), benchQueue); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// BenchmarkSenderSend: the sender's whole delivery of one command (its
// attributes and delivery signature, the message and its delivered event
// in one write) to an in-memory store. Floor: BenchmarkFloorStoreDeliver.
func BenchmarkSenderSend(b *testing.B) {
	clk := clock.System()
	st := benchStore(b, clk)
	x := newBenchSender(b, st, clk)
	d := benchDelivery()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(d.Body)))
	i := 0
	for b.Loop() {
		if err := x.Send(ctx, d); err != nil {
			b.Fatal(err)
		}
		i++
		purgeEvery(b, st, i, 4096)
	}
}

// BenchmarkFloorStoreDeliver is the store's write of the same message with
// the four identifying attributes and the same event: what any sender
// must do, without building attributes or signing.
func BenchmarkFloorStoreDeliver(b *testing.B) {
	clk := clock.System()
	st := benchStore(b, clk)
	sink := &outboxSink{store: st, log: slog.New(slog.DiscardHandler)}
	d := benchDelivery()
	del := embedded.Delivery{Queue: benchQueue, Body: d.Body,
		Attributes: map[string]string{provenance.AttrCommandID: d.CommandID, provenance.AttrSource: d.Source, provenance.AttrTarget: d.Target, provenance.AttrCommand: d.Command},
		Event:      sink.entry(d.Event)}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(d.Body)))
	i := 0
	for b.Loop() {
		if _, err := st.Deliver(ctx, del); err != nil {
			b.Fatal(err)
		}
		i++
		purgeEvery(b, st, i, 4096)
	}
}

func newBenchSender(tb testing.TB, st *embedded.Store, clk clock.Clock) sender {
	tb.Helper()
	sig, _, err := loadOrCreateDeliverySigner(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return sender{s: st, clk: clk, sink: &outboxSink{store: st, log: slog.New(slog.DiscardHandler)}, sig: sig}
}

// TestSenderSignsDelivery: a delivered message carries the four
// identifying attributes and a signature its target's key verifies.
func TestSenderSignsDelivery(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC))
	st := benchStore(t, clk)
	x := newBenchSender(t, st, clk)
	d := benchDelivery()
	if err := x.Send(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	got, err := st.Receive(context.Background(), benchQueue, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v %v", got, err)
	}
	a := got[0].Attributes
	if a[provenance.AttrCommandID] != d.CommandID || a[provenance.AttrSource] != d.Source || a[provenance.AttrTarget] != d.Target || a[provenance.AttrCommand] != d.Command ||
		a[provenance.AttrKeyID] != x.sig.ID() || !strings.HasPrefix(a[provenance.AttrSignature], "v1=") {
		t.Fatalf("attributes %v", a)
	}
	k, err := x.sig.Key("orders")
	if err != nil {
		t.Fatal(err)
	}
	m := provenance.FromAttributes(a, got[0].Body)
	if err := provenance.Verify(k, &m); err != nil {
		t.Fatalf("the target's key does not verify the delivered message: %v", err)
	}
}

// TestDeadLetteredMessageKeepsItsSignature: the store moves a message to
// its DLQ with its body and attributes, so it verifies there too.
func TestDeadLetteredMessageKeepsItsSignature(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC))
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: "orders-dlq"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: benchQueue, DeadLetterQueue: "orders-dlq", MaxReceives: 1}); err != nil {
		t.Fatal(err)
	}
	x := newBenchSender(t, st, clk)
	d := benchDelivery()
	if err := x.Send(ctx, d); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second receive moves it: received more than MaxReceives times
		if _, err := st.Receive(ctx, benchQueue, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
	}
	got, err := st.Receive(ctx, "orders-dlq", 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("DLQ receive: %v %v", got, err)
	}
	if got[0].Attributes[localqueue.AttrDLQReason] != localqueue.DLQReasonMaxReceives || !bytes.Equal(got[0].Body, d.Body) {
		t.Fatalf("dead-lettered message: %v", got[0].Attributes)
	}
	m := provenance.FromAttributes(got[0].Attributes, got[0].Body)
	if err := x.sig.Verify(&m); err != nil {
		t.Fatalf("the dead-lettered message does not verify: %v", err)
	}
}

// TestDeliveryKeyFile: the master is made once, 0600, and read back; a
// file others can read, or that holds no master, is refused.
func TestDeliveryKeyFile(t *testing.T) {
	dir := t.TempDir()
	s1, path, err := loadOrCreateDeliverySigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(path) != DeliveryKeyFile {
		t.Fatalf("key file %s: %v %v", path, fi.Mode(), err)
	}
	s2, _, err := loadOrCreateDeliverySigner(dir)
	if err != nil || s2.ID() != s1.ID() {
		t.Fatalf("second start: %v, id %s want %s", err, s2.ID(), s1.ID())
	}
	if other, _, _ := loadOrCreateDeliverySigner(t.TempDir()); other.ID() == s1.ID() {
		t.Fatal("two data directories made the same master")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateDeliverySigner(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("readable key file: %v", err)
	}
	if err := os.WriteFile(path, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateDeliverySigner(dir); err == nil || !strings.Contains(err.Error(), "snavio key delivery") {
		t.Fatalf("short key file: %v", err)
	}
}
