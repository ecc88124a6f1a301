package lambda

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// TestWarmFastPathCallsNothingButTheDelivery holds the warm fast path to
// the budget: once warm, a delivered command makes one AWS call,
// its SendMessage, on a plain route and on a rate-limited one (its
// tokens prefetched under a lease, in the background). The kept
// telemetry is stored by the invocation that finds it due: 1 s old or
// keepMaxEvents events.
func TestWarmFastPathCallsNothingButTheDelivery(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	seq := 0
	ev := func(target, name string) {
		t.Helper()
		seq++
		if err := f.h.Ingest(ctx, f.event(t, fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", seq), target, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm-up: the plain route's queue URL is resolved; the metered
	// route's first command finds no token, escalates, and starts the
	// prefetch (lease, then counter).
	ev("mailer", "send")
	ev("meter", "tick")
	if err := f.h.bg.wait(ctx); err != nil {
		t.Fatal(err)
	}
	ev("meter", "tick") // resolves the queue URL through the other ARN's name
	t.Logf("warm-up calls: %s", f.c.Take())

	const n = 60
	for i := range n {
		if i%2 == 0 {
			ev("mailer", "send")
		} else {
			ev("meter", "tick")
		}
	}
	if err := f.h.bg.wait(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.c.Take()
	t.Logf("%d warm commands, half rate-limited: %s", n, got)
	if got.String() != fmt.Sprintf("SQS.SendMessage=%d", n) {
		t.Errorf("%d warm commands made %s; want only their %d SendMessage calls (0 DynamoDB)", n, got, n)
	}

	// The kept events become due after keepMaxAge: the next invocation
	// stores them (one transaction per tenant, a second one the first
	// time this host's outbox writes to a tenant).
	kept := f.h.out.kept()
	f.clk.Advance(keepMaxAge)
	ev("mailer", "send")
	if got := f.c.Take(); got["DynamoDB.TransactWriteItems"] == 0 {
		t.Errorf("the invocation finding %d kept events due made %s; want outbox transactions beside its delivery", kept, got)
	} else {
		t.Logf("the invocation finding %d kept events 1 s old: %s", kept, got)
	}
	if k := f.h.out.kept(); k != 0 {
		t.Errorf("%d events still kept after the due store", k)
	}
	// keepMaxEvents: the invocation that brings the kept events to one
	// transaction's worth stores them, and none before. (Background
	// cache refreshes, started by the advanced clock, may add events.)
	stored := false
	for i := range keepMaxEvents {
		if err := f.h.bg.wait(ctx); err != nil {
			t.Fatal(err)
		}
		f.c.Take()
		before := f.h.out.kept()
		ev("mailer", "send")
		if err := f.h.bg.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if f.c.Take()["DynamoDB.TransactWriteItems"] == 0 {
			continue
		}
		if before+1 < keepMaxEvents {
			t.Errorf("command %d stored the kept events at %d, under the limit of %d", i, before+1, keepMaxEvents)
		}
		stored = true
		break
	}
	if !stored {
		t.Errorf("%d commands without the kept events stored", keepMaxEvents)
	}
	// Every delivered command (all but the escalated one) has its event
	// in the outbox once the host closes, as at SIGTERM.
	names := strings.Join(f.outboxNames(t, "acme"), " ")
	if d, want := strings.Count(names, telemetry.NameDelivered), seq-1; d != want {
		t.Errorf("acme's outbox holds %d delivered events, want %d", d, want)
	}
}

// TestKeptTelemetrySurvivesAFailedStore: when the store that would take
// the kept events fails (the outbox table is gone), Ingest fails, the
// events kept from earlier invocations stay kept, and the retry stores
// them with the refusal's own event.
func TestKeptTelemetrySurvivesAFailedStore(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for range 3 {
		if err := f.h.Ingest(ctx, f.nextEvent(t, "mailer", "send")); err != nil {
			t.Fatal(err)
		}
	}
	if k := f.h.out.kept(); k != 3 {
		t.Fatalf("%d events kept after 3 deliveries, want 3", k)
	}
	cfg := f.store
	cfg.SetDefaults()
	ddb := dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...)
	if _, err := ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(cfg.OutboxTable())}); err != nil {
		t.Fatal(err)
	}
	invalid := f.nextEvent(t, "mailer", "send")
	invalid.Detail = []byte(`{"metadata":{}}`)
	if err := f.h.Ingest(ctx, invalid); err == nil {
		t.Fatal("Ingest succeeded with the outbox table gone")
	}
	if k := f.h.out.kept(); k != 3 {
		t.Errorf("%d events kept after the failed store, want the 3 earlier ones", k)
	}
	if err := f.outbox.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Ingest(ctx, invalid); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	names := strings.Join(f.outboxNames(t, "acme"), " ")
	if d, i := strings.Count(names, telemetry.NameDelivered), strings.Count(names, telemetry.NameInvalid); d != 3 || i != 1 {
		t.Errorf("acme's outbox: %s; want 3 delivered and 1 invalid", names)
	}
}
