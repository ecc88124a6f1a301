package serve

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
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
	if _, err := st.CreateQueue(context.Background(), embedded.QueueConfig{Name: benchQueue, MaxDepth: embedded.MaxMaxDepth}); err != nil {
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
		Attributes: map[string]string{AttrCommandID: d.CommandID, AttrSource: d.Source, AttrTarget: d.Target, AttrCommand: d.Command},
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
	return sender{s: st, clk: clk, sink: &outboxSink{store: st, log: slog.New(slog.DiscardHandler)}}
}
