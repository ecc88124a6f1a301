package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var emu awstest.Emulators

// TestMain stops the emulators after the tests; the test wrapper exits
// with m.Run's result.
func TestMain(m *testing.M) {
	defer emu.Close()
	m.Run()
}

const source = "acme/billing"

var secret = []byte("0123456789abcdef0123456789abcdef")

// hog is a second source of acme's, allowed on the plain route only.
const hog = "acme/hog"

// fixture is a host on DynamoDB Local (registry, flow and outbox tables)
// and kumo (target and escalation queues), with the registry holding
// source's key, a plain route and a strict one with their ACLs.
type fixture struct {
	store     awsstore.Config // the hosts' store, without the call counter
	seq       int             // ids of nextEvent
	h         *Host           // the ingest function's
	slow      *Host           // the slow function's
	env       string          // the store's environment (table names)
	clk       *clock.Fake
	key       *signing.Key
	hogKey    *signing.Key
	c         *awstest.Calls
	raw       *sqs.Client
	outbox    *awsstore.OutboxStore
	escURL    string
	plainARN  string
	strictARN string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	d := emu.DynamoDB(t)
	k := emu.Kumo()
	raw := sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
	f := &fixture{clk: clock.NewFake(time.Now().UTC().Truncate(time.Millisecond)), c: &awstest.Calls{}, raw: raw}
	f.plainARN, _ = createQueue(t, raw)
	f.strictARN, _ = createQueue(t, raw)
	dlqARN, _ := createQueue(t, raw)
	_, f.escURL = createQueue(t, raw)

	f.env = emu.UniqueName()
	store := awsstore.Config{Env: f.env, AWSConfig: d.Config(), ClientOptions: d.ClientOptions(), SQSOptions: k.SQSOptions(), Clock: f.clk}
	reg, err := awsstore.NewRegistryStore(store)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := awsstore.NewFlowStore(store)
	if err != nil {
		t.Fatal(err)
	}
	if f.outbox, err = awsstore.NewOutboxStore(store); err != nil {
		t.Fatal(err)
	}
	for _, create := range []func(context.Context) error{reg.CreateTables, fs.CreateTables, f.outbox.CreateTables} {
		if err := create(ctx); err != nil {
			t.Fatal(err)
		}
	}
	plain := dispatchtest.RegistryRoute("mailer", "send")
	plain.QueueARN, plain.DLQARN = f.plainARN, dlqARN
	strict := dispatchtest.RegistryRoute("ledger", "post")
	strict.QueueARN, strict.DLQARN, strict.DedupeMode = f.strictARN, dlqARN, registry.DedupeStrict
	// A rate-limited route, on the plain route's queue: its fast path
	// takes prefetched tokens.
	metered := dispatchtest.RegistryRoute("meter", "tick")
	metered.QueueARN, metered.DLQARN, metered.RateLimit = f.plainARN, dlqARN, registry.RateLimit{Max: 6000, IntervalSeconds: 60}
	aclMetered := dispatchtest.RegistryACL(source, "meter", "tick")
	aclPlain := dispatchtest.RegistryACL(source, "mailer", "send")
	aclStrict := dispatchtest.RegistryACL(source, "ledger", "post")
	aclHog := dispatchtest.RegistryACL(hog, "mailer", "send")
	hogSecret := bytes.Repeat([]byte{'h'}, len(secret))
	by := registry.Actor{Who: "test", At: f.clk.Now()}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: source, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: f.clk.Now().Add(-time.Hour)}}}},
		{Key: &registry.ServiceKey{Source: hog, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: hogSecret, ActivatedAt: f.clk.Now().Add(-time.Hour)}}}},
		{Route: &plain}, {Route: &strict}, {Route: &metered}, {ACL: &aclPlain}, {ACL: &aclStrict}, {ACL: &aclMetered}, {ACL: &aclHog},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	if f.key, err = signing.NewKey("hmac-v1", secret); err != nil {
		t.Fatal(err)
	}
	if f.hogKey, err = signing.NewKey("hmac-v1", hogSecret); err != nil {
		t.Fatal(err)
	}

	f.store = store
	count, countSQS := f.c.DynamoDB, f.c.SQS
	store.ClientOptions = append(slices.Clip(store.ClientOptions), count)
	store.SQSOptions = append(slices.Clip(store.SQSOptions), countSQS)
	// Two hosts, as the two functions have: the slow one's calls do not
	// include the ingest one's kept telemetry.
	for _, fn := range []string{FunctionIngest, FunctionSlow} {
		began := time.Now()
		h, err := New(ctx, Config{Function: fn, Store: store, EscalationQueueURL: f.escURL,
			DeliveryKey: bytes.Repeat([]byte{7}, provenance.MinMasterLen), Instance: "test-" + fn,
			EscalationOptions: append(k.SQSOptions(), countSQS), Clock: f.clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s init (cold load from DynamoDB Local): %v, calls: %s", fn, time.Since(began).Round(time.Microsecond), f.c.Take())
		if fn == FunctionIngest {
			f.h = h
		} else {
			f.slow = h
		}
	}
	return f
}

// createQueue makes a queue with a name unique in the process (kumo's
// state is shared) and returns its ARN and URL.
func createQueue(t testing.TB, raw *sqs.Client) (arn, url string) {
	t.Helper()
	ctx := context.Background()
	out, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q-" + emu.UniqueName())})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := raw.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return attrs.Attributes[string(types.QueueAttributeNameQueueArn)], aws.ToString(out.QueueUrl)
}

// event is the EventBridge event of a command signed by source's key.
func (f *fixture) event(t testing.TB, id, target, name string) events.CloudWatchEvent {
	t.Helper()
	return f.eventFrom(t, source, f.key, id, target, name)
}

// eventFrom is event from src, signed by key.
func (f *fixture) eventFrom(t testing.TB, src string, key *signing.Key, id, target, name string) events.CloudWatchEvent {
	t.Helper()
	env := envelope.New(id, f.clk.Now(), target, name, []byte(`{"n":1}`))
	if err := key.SignEnvelope(&env, src); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return events.CloudWatchEvent{Version: "0", ID: "ev-" + id, DetailType: envelope.EventType, Source: src, Region: "us-east-1", Time: f.clk.Now(), Detail: b}
}

// nextEvent is event with the next id of the fixture's sequence.
func (f *fixture) nextEvent(t testing.TB, target, name string) events.CloudWatchEvent {
	t.Helper()
	f.seq++
	return f.event(t, fmt.Sprintf("5e1f0c3a-7d2b-4c9e-8f00-%012d", f.seq), target, name)
}

// eventJSON is nextEvent as the Runtime API hands it to the bootstrap.
func (f *fixture) eventJSON(t testing.TB, target, name string) []byte {
	t.Helper()
	b, err := json.Marshal(f.nextEvent(t, target, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// receive takes every message of the queue at url.
func (f *fixture) receive(t testing.TB, url string) []types.Message {
	t.Helper()
	var out []types.Message
	for {
		got, err := f.raw.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		out = append(out, got.Messages...)
	}
}

func (f *fixture) queueURL(t testing.TB, arn string) string {
	t.Helper()
	u, err := f.raw.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(arn[strings.LastIndexByte(arn, ':')+1:])})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(u.QueueUrl)
}

// poll does what Lambda's SQS poller does: it receives the escalation
// queue's messages, calls Slow with them and deletes those not reported
// failed. It returns the response.
func (f *fixture) poll(t *testing.T) (events.SQSEventResponse, int) {
	t.Helper()
	msgs := f.receive(t, f.escURL)
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs"})
	}
	f.c.Take()
	began := time.Now()
	resp, err := f.slow.Slow(context.Background(), ev)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	got := f.c.Take()
	desc, all, ddb := got.String(), got.Total(), got.Of("DynamoDB")
	t.Logf("Slow, %d records: %v; %d AWS calls (%d DynamoDB): %s", len(ev.Records), took.Round(time.Microsecond), all, ddb, desc)
	for _, m := range msgs {
		if slices.ContainsFunc(resp.BatchItemFailures, func(x events.SQSBatchItemFailure) bool { return x.ItemIdentifier == aws.ToString(m.MessageId) }) {
			continue
		}
		if _, err := f.raw.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(f.escURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return resp, ddb
}

// ingest calls Ingest and logs its latency and AWS calls.
func (f *fixture) ingest(t *testing.T, what string, ev events.CloudWatchEvent) (calls string, all int) {
	t.Helper()
	f.c.Take()
	began := time.Now()
	if err := f.h.Ingest(context.Background(), ev); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	took := time.Since(began)
	got := f.c.Take()
	desc, all := got.String(), got.Total()
	t.Logf("Ingest, %s: %v; %d AWS calls: %s", what, took.Round(time.Microsecond), all, desc)
	return desc, all
}

// outboxNames is the names of tenant's outbox records, once both hosts
// stored the telemetry they keep (as they do at shutdown).
func (f *fixture) outboxNames(t *testing.T, tenant string) []string {
	t.Helper()
	for _, h := range []*Host{f.h, f.slow} {
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := f.outbox.Read(context.Background(), tenant, 0, awsstore.MaxOutboxRead)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	return names
}

func TestIngestDeliversSignedCommandOnce(t *testing.T) {
	f := newFixture(t)
	f.ingest(t, "first plain command (cold: resolves the queue URL)", f.event(t, "0f8fad5b-d9cb-469f-a165-000000000001", "mailer", "send"))
	desc, _ := f.ingest(t, "second plain command (warm fast path)", f.event(t, "0f8fad5b-d9cb-469f-a165-000000000002", "mailer", "send"))
	// The budget: the delivery's SendMessage alone; the delivered event
	// is kept in memory (docs/lambda.md, "Zero calls once warm").
	if want := "SQS.SendMessage=1"; desc != want {
		t.Errorf("warm fast path calls: %s, want %s", desc, want)
	}
	msgs := f.receive(t, f.queueURL(t, f.plainARN))
	if len(msgs) != 2 {
		t.Fatalf("target queue holds %d messages, want 2", len(msgs))
	}
	for _, m := range msgs {
		var env struct {
			Command struct{ Source string } `json:"command"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil {
			t.Fatal(err)
		}
		if env.Command.Source != source {
			t.Errorf("delivered command.source = %q, want %q", env.Command.Source, source)
		}
	}
	// Two delivered events (the skew sampler may add its sample).
	if got := f.outboxNames(t, "acme"); slices.Index(got, telemetry.NameDelivered) != 0 || strings.Count(strings.Join(got, " "), telemetry.NameDelivered) != 2 {
		t.Errorf("acme's outbox: %v, want two %s", got, telemetry.NameDelivered)
	}
	if esc := f.receive(t, f.escURL); len(esc) != 0 {
		t.Errorf("escalation queue holds %d messages, want none", len(esc))
	}
}

func TestIngestInvalidCommandYieldsTelemetry(t *testing.T) {
	f := newFixture(t)
	ev := f.event(t, "0f8fad5b-d9cb-469f-a165-000000000003", "mailer", "send")
	ev.Detail = bytes.Replace(ev.Detail, []byte(`"n":1`), []byte(`"n":2`), 1) // the signature no longer matches
	desc, _ := f.ingest(t, "invalid command", ev)
	if desc != "DynamoDB.TransactWriteItems=1" {
		t.Errorf("invalid command calls: %s, want the outbox append; outbox: acme %v, platform %v", desc, f.outboxNames(t, "acme"), f.outboxNames(t, "_platform"))
	}
	if got := f.outboxNames(t, "acme"); !slices.Equal(got, []string{telemetry.NameInvalid}) {
		t.Errorf("acme's outbox: %v, want [%s]", got, telemetry.NameInvalid)
	}
	if msgs := f.receive(t, f.queueURL(t, f.plainARN)); len(msgs) != 0 {
		t.Errorf("an invalid command was delivered: %d messages", len(msgs))
	}
}

func TestStrictCommandGoesThroughSlowOnce(t *testing.T) {
	f := newFixture(t)
	ev := f.event(t, "0f8fad5b-d9cb-469f-a165-000000000004", "ledger", "post")
	desc, _ := f.ingest(t, "strict command (escalated)", ev)
	if !strings.Contains(desc, "SQS.SendMessage=1") {
		t.Errorf("strict command calls: %s, want one SendMessage to the escalation queue", desc)
	}
	escs := f.receive(t, f.escURL)
	if len(escs) != 1 {
		t.Fatalf("escalation queue holds %d messages, want 1", len(escs))
	}
	escBody := aws.ToString(escs[0].Body)
	if _, err := f.raw.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(f.escURL), ReceiptHandle: escs[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	resp, ddb := f.poll(t)
	if len(resp.BatchItemFailures) != 0 || ddb == 0 {
		t.Fatalf("failures: %+v, %d DynamoDB calls", resp.BatchItemFailures, ddb)
	}
	// The budget: 3 DynamoDB calls for the strict slow path, the
	// batch's outbox append included (docs/lambda.md).
	if ddb > 3 {
		t.Errorf("strict slow path: %d DynamoDB calls, over the budget of 3", ddb)
	}
	// A copy on this environment is dropped by the fast stage's memory of
	// delivered ids; one on another environment (or a redelivered
	// escalation) by the strict claim in the slow stage.
	f.ingest(t, "the same strict command again", ev)
	if resp, _ := f.poll(t); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("duplicate: failures %+v", resp.BatchItemFailures)
	}
	f.c.Take()
	resp, err := f.slow.Slow(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "again", Body: escBody, Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the escalation again: %v, failures %+v", err, resp.BatchItemFailures)
	}
	got := f.c.Take()
	desc, ddb = got.String(), got.Of("DynamoDB")
	t.Logf("Slow, the same escalation again (claim says delivered): %d DynamoDB calls: %s", ddb, desc)
	if msgs := f.receive(t, f.queueURL(t, f.strictARN)); len(msgs) != 1 {
		t.Fatalf("strict target holds %d messages, want 1", len(msgs))
	}
	names := f.outboxNames(t, "acme")
	if n := strings.Count(strings.Join(names, " "), telemetry.NameDelivered); n != 1 {
		t.Errorf("acme's outbox: %v, want one %s", names, telemetry.NameDelivered)
	}
}

func TestSlowReportsFailingRecords(t *testing.T) {
	f := newFixture(t)
	good := f.event(t, "0f8fad5b-d9cb-469f-a165-000000000005", "ledger", "post")
	f.ingest(t, "strict command", good)
	msgs := f.receive(t, f.escURL)
	if len(msgs) != 1 {
		t.Fatalf("escalation queue holds %d, want 1", len(msgs))
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "corrupt", Body: `{"envelope":{}}`, Attributes: map[string]string{"ApproximateReceiveCount": "1"}},
		{MessageId: "good", Body: aws.ToString(msgs[0].Body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}},
	}}
	resp, err := f.slow.Slow(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "corrupt" {
		t.Fatalf("failures %+v, want the corrupt record alone", resp.BatchItemFailures)
	}
	if n := len(f.receive(t, f.queueURL(t, f.strictARN))); n != 1 {
		t.Errorf("the good record of the batch: %d deliveries, want 1", n)
	}
}

func TestSlowGivesUpAfterMaxReceives(t *testing.T) {
	f := newFixture(t)
	f.ingest(t, "strict command", f.event(t, "0f8fad5b-d9cb-469f-a165-000000000006", "ledger", "post"))
	msgs := f.receive(t, f.escURL)
	if len(msgs) != 1 {
		t.Fatalf("escalation queue holds %d, want 1", len(msgs))
	}
	// The target queue is gone: every delivery fails.
	if _, err := f.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(f.queueURL(t, f.strictARN))}); err != nil {
		t.Fatal(err)
	}
	for receives := 1; receives <= DefaultMaxReceives; receives++ {
		rec := events.SQSMessage{MessageId: "m", Body: aws.ToString(msgs[0].Body), Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives)}}
		resp, err := f.slow.Slow(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
		if err != nil {
			t.Fatal(err)
		}
		if failed := len(resp.BatchItemFailures) == 1; failed != (receives < DefaultMaxReceives) {
			t.Fatalf("receive %d: failures %+v; want a failure before receive %d, none at it", receives, resp.BatchItemFailures, DefaultMaxReceives)
		}
	}
	if names := f.outboxNames(t, "acme"); !slices.Contains(names, telemetry.NameFailed) {
		t.Errorf("acme's outbox: %v, want %s once given up", names, telemetry.NameFailed)
	}
}

func TestFromEnv(t *testing.T) {
	key := "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=" // 32 bytes
	good := map[string]string{EnvFunction: "slow", EnvEnv: "prod", EnvEscalationQueue: "https://sqs.eu-west-1.amazonaws.com/123456789012/esc", EnvDeliveryKey: key}
	with := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return good[name]
		}
	}
	awsCfg := aws.Config{Region: "eu-west-1"}
	c, err := FromEnv(with("", ""), awsCfg)
	if err != nil || c.Function != FunctionSlow || c.MaxReceives != DefaultMaxReceives || len(c.DeliveryKey) != 32 || c.Store.Env != "prod" {
		t.Fatalf("good environment: %+v, %v", c, err)
	}
	for _, tc := range []struct{ name, value, want string }{
		{EnvFunction, "", EnvFunction},
		{EnvFunction, "fast", EnvFunction},
		{EnvEscalationQueue, "", EnvEscalationQueue},
		{EnvEscalationQueue, "sqs/esc", EnvEscalationQueue},
		{EnvDeliveryKey, "", EnvDeliveryKey},
		{EnvDeliveryKey, "not base64!", "not base64"},
		{EnvDeliveryKey, "c2hvcnQ=", "at least 32"},
		{EnvMaxReceives, "x", EnvMaxReceives},
		{EnvMaxReceives, "0x", EnvMaxReceives},
		{EnvMaxReceives, "101", EnvMaxReceives},
		{EnvEnv, "", EnvEnv},
		{EnvEnv, "Prod!", "env"},
	} {
		if _, err := FromEnv(with(tc.name, tc.value), awsCfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v, want an error naming %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// TestWarmFigures prints the warm fast path's latency per Ingest and its
// AWS calls over 20 commands, beside one SendMessage of an escalation to
// the queue: what splitting shield and fast into two functions would add
// per command (docs/lambda.md).
func TestWarmFigures(t *testing.T) {
	f := newFixture(t)
	f.ingest(t, "warm-up", f.event(t, "0f8fad5b-d9cb-469f-a165-000000000100", "mailer", "send"))
	const n = 20
	var took, hop []time.Duration
	for i := range n {
		ev := f.event(t, "0f8fad5b-d9cb-469f-a165-"+strconv.Itoa(100000000001+i), "mailer", "send")
		f.c.Take()
		began := time.Now()
		if err := f.h.Ingest(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(began))
		if desc := f.c.Take().String(); desc != "SQS.SendMessage=1" {
			t.Errorf("command %d: calls %s", i, desc)
		}
		began = time.Now()
		if _, err := f.raw.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.escURL), MessageBody: aws.String(string(ev.Detail))}); err != nil {
			t.Fatal(err)
		}
		hop = append(hop, time.Since(began))
	}
	slices.Sort(took)
	slices.Sort(hop)
	t.Logf("warm Ingest over %d commands: p50 %v, p90 %v; one SendMessage to the escalation queue: p50 %v, p90 %v (emulators on 127.0.0.1)",
		n, took[n/2].Round(time.Microsecond), took[n*9/10].Round(time.Microsecond), hop[n/2].Round(time.Microsecond), hop[n*9/10].Round(time.Microsecond))
}

// TestIngestRetriesWhatItCouldNotHandOff: a failed hand-off is an error
// (Lambda retries the event), and the retry, once the queue is back,
// hands the command off; an event that is not a command is no error.
func TestIngestRetriesWhatItCouldNotHandOff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other := events.CloudWatchEvent{DetailType: "something.else", Source: source, Detail: json.RawMessage(`{}`)}
	if err := f.h.Ingest(ctx, other); err != nil {
		t.Errorf("an event that is not a command: %v, want nil (not retried)", err)
	}
	if _, err := f.raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(f.escURL)}); err != nil {
		t.Fatal(err)
	}
	ev := f.event(t, "0f8fad5b-d9cb-469f-a165-000000000007", "ledger", "post")
	err := f.h.Ingest(ctx, ev)
	if err == nil || !strings.Contains(err.Error(), "handing it to the slow stage failed") {
		t.Fatalf("hand-off to a missing queue: %v, want a retryable error", err)
	}
	name := f.escURL[strings.LastIndexByte(f.escURL, '/')+1:]
	if _, err := f.raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Ingest(ctx, ev); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n := len(f.receive(t, f.escURL)); n != 1 {
		t.Fatalf("escalation queue holds %d after the retry, want 1", n)
	}
}

// TestSlowBringsBackARacedEscalationEarly: an escalation whose strict id
// another attempt holds in progress is reported failed and made visible
// again in raceRetry; once that attempt completed, it is dropped.
func TestSlowBringsBackARacedEscalationEarly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := emu.DynamoDB(t)
	fs, err := awsstore.NewFlowStore(awsstore.Config{Env: f.env, AWSConfig: d.Config(), ClientOptions: d.ClientOptions()})
	if err != nil {
		t.Fatal(err)
	}
	const id = "0f8fad5b-d9cb-469f-a165-000000000008"
	now := f.clk.Now()
	other := flow.DedupeRecord{Tenant: "acme", ID: id, PayloadHash: flow.PayloadHash([]byte(`{"n":1}`)), State: flow.ClaimInProgress, Owner: "other/1", ExpiresAt: now.Add(30 * time.Second)}
	if ok, _, err := fs.Claim(ctx, other, now); err != nil || !ok {
		t.Fatalf("the other attempt's claim: %v, %v", ok, err)
	}
	f.ingest(t, "strict command", f.event(t, id, "ledger", "post"))
	msgs := f.receive(t, f.escURL)
	if len(msgs) != 1 {
		t.Fatalf("escalation queue holds %d, want 1", len(msgs))
	}
	rec := events.SQSMessage{MessageId: aws.ToString(msgs[0].MessageId), ReceiptHandle: aws.ToString(msgs[0].ReceiptHandle), Body: aws.ToString(msgs[0].Body), Attributes: msgs[0].Attributes}
	f.c.Take()
	resp, err := f.slow.Slow(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("raced record: %v, failures %+v; want it failed", err, resp.BatchItemFailures)
	}
	if desc := f.c.Take().String(); !strings.Contains(desc, "SQS.ChangeMessageVisibility=1") {
		t.Errorf("raced record calls: %s, want one ChangeMessageVisibility", desc)
	}
	if err := fs.Complete(ctx, other.Key(), other.Owner, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	rec.Attributes = map[string]string{"ApproximateReceiveCount": "2"}
	if resp, err := f.slow.Slow(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("after the other attempt completed: %v, failures %+v; want it done", err, resp.BatchItemFailures)
	}
	if n := len(f.receive(t, f.queueURL(t, f.strictARN))); n != 0 {
		t.Errorf("the raced command was delivered %d times here; the other attempt delivered it", n)
	}
}
