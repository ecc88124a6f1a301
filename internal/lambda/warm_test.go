package lambda

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
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
		// The invocation adds its delivered event and, for 1% of commands,
		// the shield's skew sample: two at most.
		if before+2 < keepMaxEvents {
			t.Errorf("command %d stored the kept events at %d or %d, under the limit of %d", i, before+1, before+2, keepMaxEvents)
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
	// The first invocation of a quiet environment stores its event at
	// once; the next three, back to back, keep theirs.
	for range 4 {
		if err := f.h.Ingest(ctx, f.nextEvent(t, "mailer", "send")); err != nil {
			t.Fatal(err)
		}
	}
	if k := keptDelivered(f.h.out); k != 3 {
		t.Fatalf("%d delivered events kept after 3 deliveries in a busy environment, want 3", k)
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
	if k := keptDelivered(f.h.out); k != 3 {
		t.Errorf("%d delivered events kept after the failed store, want the 3 earlier ones", k)
	}
	if err := f.outbox.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Ingest(ctx, invalid); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	// The first command's event went with the deleted table: the three
	// kept ones and the refusal's are in the new one.
	names := strings.Join(f.outboxNames(t, "acme"), " ")
	if d, i := strings.Count(names, telemetry.NameDelivered), strings.Count(names, telemetry.NameInvalid); d != 3 || i != 1 {
		t.Errorf("acme's outbox: %s; want 3 delivered and 1 invalid", names)
	}
}

// TestStagesFlushFairnessRollups: the ingest and slow functions store
// their fairness rollups every rollupEvery, checked by their invocations,
// and at shutdown; the fairness auditor function reads them from the flow
// table on DynamoDB Local and bans the source that dominates a route.
// 1,000 commands at one per 120 ms of the fake clock (8.3/s, two
// minutes) make two rollup writes on the ingest function, each one
// BatchWriteItem, and nothing else new.
func TestStagesFlushFairnessRollups(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const n, every = 1000, 120 * time.Millisecond
	want := map[string]int64{}
	f.c.Take()
	all := awstest.Counts{}
	for i := range n {
		f.clk.Advance(every)
		var ev events.CloudWatchEvent
		id := fmt.Sprintf("9b2e4f7a-1c3d-4e5f-8a9b-%012d", i)
		switch {
		case i%100 == 99: // strict: through the slow function
			ev = f.event(t, id, "ledger", "post")
			want[source+" ledger/post"]++
		case i%15 == 0:
			ev = f.event(t, id, "mailer", "send")
			want[source+" mailer/send"]++
		default:
			ev = f.eventFrom(t, hog, f.hogKey, id, "mailer", "send")
			want[hog+" mailer/send"]++
		}
		if err := f.h.Ingest(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := f.h.bg.wait(ctx); err != nil {
			t.Fatal(err)
		}
		for k, v := range f.c.Take() {
			all[k] += v
		}
	}
	perMinute := int(time.Duration(n) * every / rollupEvery)
	t.Logf("%d commands over %v of the fake clock: %s", n, time.Duration(n)*every, all)
	if got := all["DynamoDB.BatchWriteItem"]; got != perMinute {
		t.Errorf("%d commands over %v made %d BatchWriteItem calls; want one rollup write per %v: %d", n, time.Duration(n)*every, got, rollupEvery, perMinute)
	}
	if got := all["SQS.SendMessage"]; got != n {
		t.Errorf("%d commands made %d SendMessage calls; want one each", n, got)
	}
	for {
		if _, _ = f.poll(t); len(f.receive(t, f.escURL)) == 0 {
			break
		}
	}
	// Shutdown (SIGTERM) stores what each function counted since its
	// last flush.
	for _, h := range []*Host{f.h, f.slow} {
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := awsstore.NewFlowStore(f.store)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := fs.ReadRollups(ctx, time.Time{}, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, instances := map[string]int64{}, map[string]bool{}
	for _, r := range rs {
		got[r.Source+" "+r.Target+"/"+r.Command] += r.Dispatches
		instances[r.Instance] = true
	}
	if !maps.Equal(got, want) || !instances["test-"+FunctionIngest] || !instances["test-"+FunctionSlow] {
		t.Fatalf("rollups in the flow table: %v from %v; want %v from both functions", got, instances, want)
	}

	// The auditor function, on the same flow table, sees hog's 93% of
	// mailer/send within its lookback.
	var metrics bytes.Buffer
	run, err := NewJob(JobConfig{Function: FunctionAuditor, Store: f.jobStore(t), MetricsOut: &metrics, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.(func(context.Context, events.CloudWatchEvent) error)(ctx, events.CloudWatchEvent{}); err != nil {
		t.Fatal(err)
	}
	bans, err := fs.Bans(ctx, f.clk.Now())
	if err != nil || len(bans) != 1 || bans[0].Source != hog {
		t.Fatalf("bans after the audit: %+v %v; want one of %s", bans, err, hog)
	}
}

// keptDelivered counts the delivered events o keeps (the shield's 1%
// skew samples come and go beside them).
func keptDelivered(o *outbox) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.buf {
		if e.Event.EventName() == telemetry.NameDelivered {
			n++
		}
	}
	return n
}
