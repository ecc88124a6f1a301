package embedded

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func fakeStore(t *testing.T) (*Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	return openTest(t, Options{Ephemeral: true, Clock: clk}), clk
}

func mustQueue(t *testing.T, s *Store, cfg localqueue.QueueConfig) localqueue.Queue {
	t.Helper()
	q, err := s.CreateQueue(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestSendAndComplete(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	mustQueue(t, s, localqueue.QueueConfig{Name: "q"})
	now := clk.Now()
	rec := flow.DedupeRecord{Tenant: "t", ID: "cmd-1", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "o1", ExpiresAt: now.Add(30 * time.Second)}
	if ok, _, err := s.Claim(ctx, rec, now); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// A stranger cannot send under the claim: nothing is sent.
	if _, err := s.SendAndComplete(ctx, "q", []byte("x"), nil, rec.Key(), "o2", now.Add(5*time.Minute), now); !errors.Is(err, flow.ErrNotOwner) {
		t.Fatalf("stranger: %v", err)
	}
	// A refused send leaves the claim in progress.
	if _, err := s.SendAndComplete(ctx, "nope", []byte("x"), nil, rec.Key(), "o1", now.Add(5*time.Minute), now); !errors.Is(err, localqueue.ErrQueueNotFound) {
		t.Fatalf("missing queue: %v", err)
	}
	if stats, _ := s.ListQueues(ctx); stats[0].Visible != 0 {
		t.Fatal("a message was sent without its claim completing")
	}
	id, err := s.SendAndComplete(ctx, "q", []byte("x"), nil, rec.Key(), "o1", now.Add(5*time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	_, ex, _ := s.Claim(ctx, flow.DedupeRecord{Tenant: "t", ID: "cmd-1", State: flow.ClaimInProgress, Owner: "o3", ExpiresAt: now.Add(time.Minute)}, now.Add(time.Minute))
	if ex.State != flow.ClaimDelivered || !ex.ExpiresAt.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("claim after send: %+v", ex)
	}
	got, _ := s.Receive(ctx, "q", 10, 0)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("queue holds %+v", got)
	}
	// Completed already: a second send under the same claim is refused.
	if _, err := s.SendAndComplete(ctx, "q", []byte("x"), nil, rec.Key(), "o1", now.Add(5*time.Minute), now); !errors.Is(err, flow.ErrNotOwner) {
		t.Fatalf("second send: %v", err)
	}
}

// Deliver writes a message and its telemetry event in one transaction: a
// refused send appends no event, an event that cannot be stored sends no
// message, and a delivered message always has its event.
func TestDeliverWritesTheMessageAndItsEventTogether(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	mustQueue(t, s, localqueue.QueueConfig{Name: "q", MaxDepth: 1})
	ev := func(id string) *OutboxEntry {
		return &OutboxEntry{Tenant: "acme", Event: telemetry.Delivered{CommandID: id, Source: "acme/app", Target: "t", CommandName: "c", Path: telemetry.PathFast}}
	}
	id, err := s.Deliver(ctx, Delivery{Queue: "q", Body: []byte("one"), Event: ev("cmd-1")})
	if err != nil {
		t.Fatal(err)
	}
	// The queue is full: neither the message nor its event.
	if _, err := s.Deliver(ctx, Delivery{Queue: "q", Body: []byte("two"), Event: ev("cmd-2")}); !errors.Is(err, localqueue.ErrQueueFull) {
		t.Fatalf("full queue: %v", err)
	}
	// No tenant to file the event under: refused before anything is written.
	if _, err := s.Deliver(ctx, Delivery{Queue: "q", Body: []byte("three"), Event: &OutboxEntry{Event: ev("cmd-3").Event}}); err == nil || !strings.Contains(err.Error(), "telemetry event") {
		t.Fatalf("bad event: %v", err)
	}
	recs, err := s.ReadTelemetry(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Seq != 1 || recs[0].Name != "snavio.command.delivered" || !strings.Contains(string(recs[0].Event), `"command_id":"cmd-1"`) {
		t.Fatalf("telemetry %+v, want cmd-1's delivered event alone", recs)
	}
	got, _ := s.Receive(ctx, "q", 10, 0)
	if len(got) != 1 || got[0].ID != id || string(got[0].Body) != "one" {
		t.Fatalf("queue holds %+v, want the first message alone", got)
	}
}
