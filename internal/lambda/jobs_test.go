package lambda

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/encoding/cbor"

	"github.com/snavio/snavio/internal/monitor"
	"github.com/snavio/snavio/internal/snapshotbin"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// kumoAccount is the account kumo puts in every ARN.
const kumoAccount = "000000000000"

// telemetryBus is kumo's SNS with one topic and subscribed queue per
// tenant, as tenant on-boarding makes them.
type telemetryBus struct {
	pub    *awsstore.SNSPublisher
	batch  *awstest.KumoPublishBatch
	sqs    *sqs.Client
	queues map[string]string
}

func newTelemetryBus(t *testing.T, store awsstore.Config, tenants ...string) *telemetryBus {
	t.Helper()
	ctx := context.Background()
	k := emu.Kumo()
	store.AccountID = kumoAccount
	store.SNSOptions = k.SNSOptions()
	pub, err := awsstore.NewSNSPublisher(store)
	if err != nil {
		t.Fatal(err)
	}
	raw := sns.NewFromConfig(k.Config(), k.SNSOptions()...)
	b := &telemetryBus{batch: &awstest.KumoPublishBatch{SNS: raw}, sqs: sqs.NewFromConfig(k.Config(), k.SQSOptions()...), queues: map[string]string{}}
	b.pub = pub.WithBatch(b.batch)
	for _, tenant := range tenants {
		arn, err := pub.TopicARN(tenant)
		if err != nil {
			t.Fatal(err)
		}
		topic, err := raw.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(arn[strings.LastIndexByte(arn, ':')+1:])})
		if err != nil {
			t.Fatal(err)
		}
		_, b.queues[tenant] = createQueue(t, b.sqs)
		if _, err := raw.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(b.queues[tenant])}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// published is one event as a tenant's telemetry queue holds it.
type published struct {
	Name  string
	Seq   int
	Event map[string]any
}

// read takes every message of tenant's queue, decoding SNS's envelope.
func (b *telemetryBus) read(t *testing.T, tenant string) []published {
	t.Helper()
	var out []published
	for {
		got, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.queues[tenant]), MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			slices.SortFunc(out, func(a, b published) int { return a.Seq - b.Seq })
			return out
		}
		for _, m := range got.Messages {
			var env struct {
				Type, Message     string
				MessageAttributes map[string]struct{ Type, Value string }
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil || env.Type != "Notification" {
				t.Fatalf("not an SNS notification (%v): %s", err, aws.ToString(m.Body))
			}
			p := published{Name: env.MessageAttributes[awsstore.AttrEvent].Value}
			p.Seq, _ = strconv.Atoi(env.MessageAttributes[awsstore.AttrSeq].Value)
			if err := json.Unmarshal([]byte(env.Message), &p.Event); err != nil {
				t.Fatalf("message is not the event's JSON: %v", err)
			}
			out = append(out, p)
		}
	}
}

func skew(tenant string, i int) telemetry.Event {
	return telemetry.SkewSample{Source: tenant + "/svc", SkewSeconds: float64(i), SentAt: t0, ReceivedAt: t0}
}

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// outboxOnDynamoDBLocal is an outbox table with its stream.
func outboxOnDynamoDBLocal(t *testing.T, clk clock.Clock) (awsstore.Config, *awsstore.OutboxStore, *awstest.StreamPoller) {
	t.Helper()
	ctx := context.Background()
	d := emu.DynamoDB(t)
	store := awsstore.Config{Env: emu.UniqueName(), AWSConfig: d.Config(), ClientOptions: d.ClientOptions(), Clock: clk}
	ob, err := awsstore.NewOutboxStore(store)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	store.SetDefaults()
	poll, err := awstest.NewStreamPoller(ctx, d, store.OutboxTable())
	if err != nil {
		t.Fatal(err)
	}
	return store, ob, poll
}

func noWait(context.Context, time.Duration) error { return nil }

// TestOutboxDrainOnStreams: events appended to the outbox on DynamoDB
// Local come through its stream to the drain and out through kumo's SNS
// to each tenant's SQS telemetry queue, in batches of 10 per tenant;
// a tenant without a topic gets its events given up, reported as
// snavio.telemetry.dropped on the platform's stream, whose report comes
// through the stream in turn.
func TestOutboxDrainOnStreams(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	store, ob, poll := outboxOnDynamoDBLocal(t, clk)
	bus := newTelemetryBus(t, store, "acme", "globex", telemetry.PlatformTenant)
	var metrics bytes.Buffer
	emf := NewEMF(FunctionOutbox, clk)
	var logs bytes.Buffer
	drain := NewOutboxDrain(bus.pub, ob, OutboxConfig{Sleep: noWait, Clock: clk, Metrics: emf, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	var entries []awsstore.OutboxEntry
	for i := range 12 {
		entries = append(entries, awsstore.OutboxEntry{Tenant: "acme", Event: skew("acme", i)})
	}
	entries = append(entries, awsstore.OutboxEntry{Tenant: "globex", Event: skew("globex", 0)},
		awsstore.OutboxEntry{Tenant: "nobody", Event: skew("nobody", 0)}, awsstore.OutboxEntry{Tenant: "nobody", Event: skew("nobody", 1)})
	if _, err := ob.Append(ctx, entries); err != nil {
		t.Fatal(err)
	}
	clk.Advance(90 * time.Second)
	ev, err := poll.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The stream also carries each tenant's sequence item (an INSERT).
	if len(ev.Records) != 15+3 {
		t.Fatalf("stream records %d, want 15 events and 3 sequence items", len(ev.Records))
	}
	resp, err := drain.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %+v %v", resp, err)
	}
	acme := bus.read(t, "acme")
	if len(acme) != 12 {
		seqs := make([]int, len(acme))
		for i, p := range acme {
			seqs[i] = p.Seq
		}
		t.Fatalf("acme's telemetry queue holds %d events (seq %v), want 12; PublishBatch sizes %v; the drain logged:\n%s", len(acme), seqs, bus.batch.Batches(), logs.String())
	}
	for i, p := range acme {
		if p.Seq != i+1 || p.Name != telemetry.NameSkewSample || p.Event["skew_seconds"] != float64(i) {
			t.Fatalf("acme's event %d: %+v", i, p)
		}
	}
	if g := bus.read(t, "globex"); len(g) != 1 || g[0].Seq != 1 {
		t.Fatalf("globex's queue: %+v", g)
	}
	if !slices.Equal(bus.batch.Batches(), []int{10, 2, 2}) {
		t.Errorf("PublishBatch sizes %v, want acme's 10 and 2, then nobody's 2 (refused); globex's one event goes by Publish", bus.batch.Batches())
	}

	// The drain's own report: on the platform's stream (and nobody's,
	// whose topic is missing: given up, not reported again).
	ev, err = poll.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := drain.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %+v %v", resp, err)
	}
	plat := bus.read(t, telemetry.PlatformTenant)
	if len(plat) != 1 || plat[0].Name != telemetry.NameDropped {
		t.Fatalf("platform's queue: %+v", plat)
	}
	want := map[string]any{"event": telemetry.NameDropped, "tenant": "nobody", "dropped_events": float64(2), "reason": telemetry.DroppedPublishFailed,
		"queue_age_seconds": float64(90), "last_received_at": t0.Format(time.RFC3339)}
	if fmt.Sprint(plat[0].Event) != fmt.Sprint(want) {
		t.Fatalf("dropped report %v, want %v", plat[0].Event, want)
	}
	if ev, err = poll.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.Records {
		if r.EventName == "INSERT" && r.Change.NewImage["sk"].String() != "seq" {
			t.Fatalf("a report of a report was written: %+v", r.Change.NewImage)
		}
	}

	if err := emf.Flush(&metrics); err != nil {
		t.Fatal(err)
	}
	got := emfValues(t, &metrics)
	if got[MetricOutboxPublished] != float64(13+1) || got[MetricOutboxDropped] != float64(2+1) {
		t.Errorf("metrics %v: want 14 published (13, then the platform's report) and 3 dropped (nobody's 2, then its report)", got)
	}
}

// flakyPublisher fails the messages of some tenants retryably for a
// number of calls, then publishes them.
type flakyPublisher struct {
	failing map[string]int // tenant -> calls left failing
	calls   int
	got     []awsstore.TelemetryMessage
}

func (f *flakyPublisher) Publish(_ context.Context, msgs []awsstore.TelemetryMessage) []awsstore.PublishFailure {
	f.calls++
	var failed []awsstore.PublishFailure
	hit := map[string]bool{}
	for i, m := range msgs {
		if f.failing[m.Tenant] > 0 {
			hit[m.Tenant] = true
			failed = append(failed, awsstore.PublishFailure{Index: i, Code: "Throttling", Message: "slow down", Retryable: true})
			continue
		}
		f.got = append(f.got, m)
	}
	for t := range hit {
		f.failing[t]--
	}
	return failed
}

type noAppend struct{}

func (noAppend) Append(context.Context, []awsstore.OutboxEntry) ([]uint64, error) {
	return nil, fmt.Errorf("not expected")
}

// record is an INSERT stream record of an outbox event.
func record(tenant string, seq int, streamSeq string) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: streamSeq,
		NewImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute(tenant), "sk": events.NewStringAttribute(fmt.Sprintf("%020d", seq)),
			"name": events.NewStringAttribute(telemetry.NameSkewSample), "event": events.NewStringAttribute(`{"event":"snavio.telemetry.skew_sample"}`),
			"appended_at_ns": events.NewNumberAttribute(strconv.FormatInt(t0.UnixNano(), 10)),
		}}}
}

// TestOutboxDrainRetriesThenHandsBack: a retryable failure is tried
// again within the invocation; one that outlasts the attempts is handed
// back from its record's sequence number, and the others are published.
func TestOutboxDrainRetriesThenHandsBack(t *testing.T) {
	ctx := context.Background()
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("acme", 1, "100"), record("globex", 1, "101"), record("acme", 2, "102"), record("globex", 2, "103"),
	}}
	// globex fails twice: the third attempt publishes it.
	pub := &flakyPublisher{failing: map[string]int{"globex": 2}}
	var waits []time.Duration
	d := NewOutboxDrain(pub, noAppend{}, OutboxConfig{Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
	resp, err := d.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(pub.got) != 4 || pub.calls != 3 {
		t.Fatalf("resp %+v err %v published %d in %d calls", resp, err, len(pub.got), pub.calls)
	}
	if !slices.Equal(waits, []time.Duration{DefaultOutboxBackoff, 2 * DefaultOutboxBackoff}) {
		t.Errorf("waits %v", waits)
	}
	// globex fails through all 3 attempts: handed back from its first record.
	pub = &flakyPublisher{failing: map[string]int{"globex": 5}}
	d = NewOutboxDrain(pub, noAppend{}, OutboxConfig{Sleep: noWait})
	resp, err = d.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "101" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if len(pub.got) != 2 || pub.got[0].Tenant != "acme" || pub.got[0].Seq != 1 || pub.got[1].Seq != 2 {
		t.Fatalf("published %+v, want acme's two in order", pub.got)
	}
}

// TestOutboxDrainSkipsWhatIsNotAnEvent: TTL removals, sequence items,
// modifications, corrupt images and repeats are not published; the TTL
// removals are counted. (DynamoDB Local's TTL sweep cannot be driven by
// a test clock, so the removal record is built as Lambda delivers one.)
func TestOutboxDrainSkipsWhatIsNotAnEvent(t *testing.T) {
	ttl := record("acme", 3, "1")
	ttl.EventName = "REMOVE"
	ttl.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	seqItem := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{NewImage: map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute("acme"), "sk": events.NewStringAttribute("seq"), "last": events.NewNumberAttribute("4")}}}
	modify := seqItem
	modify.EventName = "MODIFY"
	corrupt := record("acme", 4, "5")
	corrupt.Change.NewImage["event"] = events.NewBooleanAttribute(true)
	noSeq := record("acme", 0, "6")
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{ttl, seqItem, modify, record("acme", 1, "2"), record("acme", 1, "3"), corrupt, noSeq}}
	pub := &flakyPublisher{}
	clk := clock.NewFake(t0)
	emf := NewEMF(FunctionOutbox, clk)
	resp, err := NewOutboxDrain(pub, noAppend{}, OutboxConfig{Metrics: emf}).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(pub.got) != 1 || pub.got[0].Seq != 1 {
		t.Fatalf("resp %+v err %v published %+v", resp, err, pub.got)
	}
	var buf bytes.Buffer
	if err := emf.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	got := emfValues(t, &buf)
	if got[MetricOutboxTTLSkipped] != 1 || got[MetricOutboxCorrupt] != 2 {
		t.Fatalf("metrics %v", got)
	}
}

// emfValues parses EMF lines as CloudWatch does, checking each line's
// directive, and returns each metric's value (a counter) or the sum of
// its values.
func emfValues(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %s", sc.Bytes())
		}
		var meta struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		}
		if err := json.Unmarshal(line["_aws"], &meta); err != nil || meta.Timestamp == 0 || len(meta.CloudWatchMetrics) != 1 {
			t.Fatalf("no EMF metadata: %s", sc.Bytes())
		}
		d := meta.CloudWatchMetrics[0]
		if d.Namespace != EMFNamespace || len(d.Dimensions) != 1 || !slices.Equal(d.Dimensions[0], []string{"Function"}) || line["Function"] == nil {
			t.Fatalf("directive %+v", d)
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			t.Fatalf("%d metrics in a directive", len(d.Metrics))
		}
		for _, m := range d.Metrics {
			raw, ok := line[m.Name]
			if !ok {
				t.Fatalf("metric %s has no value in its line", m.Name)
			}
			var v float64
			if json.Unmarshal(raw, &v) != nil {
				var vs []float64
				if err := json.Unmarshal(raw, &vs); err != nil || len(vs) == 0 || len(vs) > 100 {
					t.Fatalf("metric %s: value %s", m.Name, raw)
				}
				for _, x := range vs {
					v += x
				}
			}
			out[m.Name] += v
		}
	}
	return out
}

// TestEMFLines: counters add up, observations keep their values (100 a
// line at most), units follow the spec's names.
func TestEMFLines(t *testing.T) {
	clk := clock.NewFake(t0)
	m := NewEMF(FunctionSnapshot, clk)
	m.Count(telemetry.MetricSnapshotGenerated, 1)
	m.Count(telemetry.MetricSnapshotGenerated, 1)
	for i := range 150 {
		m.Observe(telemetry.MetricDedupSlowPathLatency, float64(i))
	}
	m.Observe(telemetry.MetricSnapshotSizeBytes, 4096)
	var buf bytes.Buffer
	if err := m.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	if n := strings.Count(text, "\n"); n != 2 {
		t.Fatalf("%d lines, want 2 (each holds one list of up to 100 values per metric):\n%s", n, text)
	}
	for _, want := range []string{
		`{"Name":"Snavio.Snapshot.Generated","Unit":"Count"}`, `{"Name":"Snavio.Dedup.SlowPathLatency","Unit":"Seconds"}`,
		`{"Name":"Snavio.Snapshot.SizeBytes","Unit":"Bytes"}`, `"Timestamp":` + strconv.FormatInt(t0.UnixMilli(), 10), `"Function":"snapshot"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	got := emfValues(t, strings.NewReader(text))
	if got[telemetry.MetricSnapshotGenerated] != 2 || got[telemetry.MetricDedupSlowPathLatency] != 149*150/2 || got[telemetry.MetricSnapshotSizeBytes] != 4096 {
		t.Fatalf("values %v", got)
	}
	buf.Reset()
	if err := m.Flush(&buf); err != nil || buf.Len() != 0 {
		t.Fatalf("a second flush wrote %q (%v)", buf.String(), err)
	}
}

// jobStore is the fixture's store configuration for a job function.
func (f *fixture) jobStore(t *testing.T) awsstore.Config {
	d, k := emu.DynamoDB(t), emu.Kumo()
	return awsstore.Config{Env: f.env, AWSConfig: d.Config(), ClientOptions: d.ClientOptions(), SQSOptions: k.SQSOptions(), Clock: f.clk}
}

// TestSnapshotJobPublishesASignedSnapshot: the snapshot function reads
// the registry on DynamoDB Local, publishes to S3 (gofakes3), and a
// loader trusting its key verifies and reads the routes back.
func TestSnapshotJobPublishesASignedSnapshot(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s3emu, bucket := snapshotBucket(t)
	seed := bytes.Repeat([]byte{3}, ed25519.SeedSize)
	store := f.jobStore(t)
	store.SnapshotBucket, store.S3Options = bucket, s3emu.ClientOptions()
	var metrics bytes.Buffer
	h, err := NewJob(JobConfig{Function: FunctionSnapshot, Store: store, SnapshotKey: ed25519.NewKeyFromSeed(seed), MetricsOut: &metrics, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(func(context.Context, events.CloudWatchEvent) error)(ctx, events.CloudWatchEvent{DetailType: "Scheduled Event"}); err != nil {
		t.Fatal(err)
	}
	ss, err := awsstore.NewSnapshotStore(store)
	if err != nil {
		t.Fatal(err)
	}
	l, err := snapshot.NewLoader(snapshot.LoaderConfig{MaxAge: time.Hour, Trusted: snapshot.TrustedKeys{DefaultSnapshotKeyID: ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)}},
		snapshot.LoaderDeps{Store: ss, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := l.Load(ctx, snapshot.KindFull)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Routes) != 3 || len(doc.ACLs) != 4 || len(doc.Keys) != 2 || doc.VersionID != snapshot.VersionIDAt(f.clk.Now()) {
		t.Fatalf("snapshot %s: %d routes, %d ACLs, %d keys", doc.VersionID, len(doc.Routes), len(doc.ACLs), len(doc.Keys))
	}
	// The compact encoding beside it, which cold starts read first.
	_, compact, err := ss.Latest(ctx, snapshotbin.DefaultPath, snapshot.DefaultMaxBytes)
	if err != nil {
		t.Fatalf("compact snapshot: %v", err)
	}
	cdoc, err := snapshotbin.Parse(compact, snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{DefaultSnapshotKeyID: ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)}})
	if err != nil || cdoc.VersionID != doc.VersionID || len(cdoc.Routes) != 3 || len(cdoc.ACLs) != 4 || len(cdoc.Keys) != 2 {
		t.Fatalf("compact snapshot: %v; want version %s with the JSON one's data", err, doc.VersionID)
	}
	got := emfValues(t, &metrics)
	if got[telemetry.MetricSnapshotGenerated] != 1 || got[telemetry.MetricSnapshotSizeBytes] == 0 {
		t.Fatalf("metrics %v", got)
	}
	// A key that is not the one the loader trusts is refused.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, ed25519.SeedSize))
	f.clk.Advance(time.Second)
	h, err = NewJob(JobConfig{Function: FunctionSnapshot, Store: store, SnapshotKey: other, MetricsOut: io.Discard, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(func(context.Context, events.CloudWatchEvent) error)(ctx, events.CloudWatchEvent{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Load(ctx, snapshot.KindFull); err == nil {
		t.Fatal("a snapshot signed by another key loaded")
	}
}

// fakeCloudWatch is CloudWatch's GetMetricData (rpc-v2-cbor, the
// protocol the SDK speaks), which no emulator here serves: it checks the
// SDK's real request and answers the age of the oldest message per queue
// name.
type fakeCloudWatch struct {
	t    *testing.T
	ages map[string]float64 // queue name -> seconds
	mu   sync.Mutex
	reqs int
}

func (f *fakeCloudWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs++
	f.mu.Unlock()
	fail := func(format string, a ...any) {
		f.t.Errorf("CloudWatch request: "+format, a...)
		http.Error(w, "bad request", http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/service/GraniteServiceVersion20100801/operation/GetMetricData" {
		fail("%s %s", r.Method, r.URL.Path)
		return
	}
	if r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" || r.Header.Get("Content-Type") != "application/cbor" ||
		!strings.Contains(r.Header.Get("Authorization"), "/us-east-1/monitoring/aws4_request") {
		fail("headers %v", r.Header)
		return
	}
	body, _ := io.ReadAll(r.Body)
	v, err := cbor.Decode(body)
	in, ok := v.(cbor.Map)
	if err != nil || !ok {
		fail("body is not a CBOR map: %v", err)
		return
	}
	start, err1 := cbor.AsTime(in["StartTime"])
	end, err2 := cbor.AsTime(in["EndTime"])
	if err1 != nil || err2 != nil || end.Sub(start) != ageLookback {
		fail("time range %v to %v (%v %v)", start, end, err1, err2)
		return
	}
	var results cbor.List
	for _, qv := range in["MetricDataQueries"].(cbor.List) {
		q := qv.(cbor.Map)
		ms := q["MetricStat"].(cbor.Map)
		m := ms["Metric"].(cbor.Map)
		dims := m["Dimensions"].(cbor.List)
		if m["Namespace"] != cbor.String("AWS/SQS") || m["MetricName"] != cbor.String("ApproximateAgeOfOldestMessage") ||
			ms["Stat"] != cbor.String("Maximum") || ms["Period"] != cbor.Uint(60) || len(dims) != 1 || dims[0].(cbor.Map)["Name"] != cbor.String("QueueName") {
			fail("query %v", q)
			return
		}
		name := string(dims[0].(cbor.Map)["Value"].(cbor.String))
		res := cbor.Map{"Id": q["Id"], "Label": cbor.String(name), "StatusCode": cbor.String("Complete"), "Timestamps": cbor.List{}, "Values": cbor.List{}}
		if age, ok := f.ages[name]; ok {
			res["Timestamps"] = cbor.List{&cbor.Tag{ID: 1, Value: cbor.Float64(float64(end.Add(-time.Minute).Unix()))}}
			res["Values"] = cbor.List{cbor.Float64(age)}
		}
		results = append(results, res)
	}
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	_, _ = w.Write(cbor.Encode(cbor.Map{"MetricDataResults": results, "Messages": cbor.List{}}))
}

// TestQueueMonitorJudgesRoutesFromSQSAndCloudWatch: depth from kumo's
// queue attributes, age from CloudWatch (the fake): the plain route's
// queue, older than twice its drain, turns unhealthy, reported once on
// the platform's stream; the strict route's stays healthy.
func TestQueueMonitorJudgesRoutesFromSQSAndCloudWatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	plainURL := f.queueURL(t, f.plainARN)
	if _, err := f.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(plainURL), MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	plainName := f.plainARN[strings.LastIndexByte(f.plainARN, ':')+1:]
	cw := &fakeCloudWatch{t: t, ages: map[string]float64{plainName: float64(3 * registry.DefaultExpectedDrainSeconds)}}
	srv := httptest.NewServer(cw)
	defer srv.Close()
	var metrics bytes.Buffer
	h, err := NewJob(JobConfig{Function: FunctionMonitor, Store: f.jobStore(t), MetricsOut: &metrics, Clock: f.clk,
		CloudWatchOptions: []func(*cloudwatch.Options){func(o *cloudwatch.Options) { o.BaseEndpoint = aws.String(srv.URL) }}})
	if err != nil {
		t.Fatal(err)
	}
	run := h.(func(context.Context, events.CloudWatchEvent) error)
	for range 2 {
		if err := run(ctx, events.CloudWatchEvent{DetailType: "Scheduled Event"}); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute)
	}
	if cw.reqs != 2 {
		t.Fatalf("%d GetMetricData calls, want one per run", cw.reqs)
	}
	recs, err := f.outbox.Read(ctx, telemetry.PlatformTenant, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var health []monitor.Event
	for _, r := range recs {
		if r.Name != "snavio.route.health" {
			continue
		}
		var e monitor.Event
		if err := json.Unmarshal(r.Event, &e); err != nil {
			t.Fatal(err)
		}
		health = append(health, e)
	}
	if len(health) != 1 || health[0].QueueARN != f.plainARN || health[0].Health != monitor.Unhealthy || health[0].Depth != 1 ||
		health[0].OldestAgeSeconds != float64(3*registry.DefaultExpectedDrainSeconds) {
		t.Fatalf("route health events %+v, want the plain route's queue unhealthy once", health)
	}
	if got := emfValues(t, &metrics); got[MetricRouteHealth+"unhealthy"] != 1 {
		t.Fatalf("metrics %v", got)
	}
}

// TestAuditorBansADominantSource: rollups in the flow table on DynamoDB
// Local, in which one source takes 95% of a route's dispatches, make the
// auditor store a global ban and report snavio.fairness.abuse_detected;
// a second run in the same window reports nothing new.
func TestAuditorBansADominantSource(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	store := f.jobStore(t)
	fs, err := awsstore.NewFlowStore(store)
	if err != nil {
		t.Fatal(err)
	}
	w := f.clk.Now().Truncate(time.Minute)
	if err := fs.PutRollups(ctx, []flow.Rollup{
		{Instance: "ingest-1", WindowStart: w, Source: "acme/hog", Target: "mailer", Command: "send", Dispatches: 950},
		{Instance: "ingest-2", WindowStart: w, Source: "acme/billing", Target: "mailer", Command: "send", Dispatches: 50},
	}, f.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	h, err := NewJob(JobConfig{Function: FunctionAuditor, Store: store, MetricsOut: &metrics, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	run := h.(func(context.Context, events.CloudWatchEvent) error)
	for range 2 {
		if err := run(ctx, events.CloudWatchEvent{}); err != nil {
			t.Fatal(err)
		}
	}
	bans, err := fs.Bans(ctx, f.clk.Now())
	if err != nil || len(bans) != 1 || bans[0].Source != "acme/hog" {
		t.Fatalf("bans %+v %v", bans, err)
	}
	recs, err := f.outbox.Read(ctx, "acme", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Name == telemetry.NameAbuseDetected {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d abuse_detected events in acme's stream, want 1", n)
	}
	if got := emfValues(t, &metrics); got[MetricAbuseDetected] != 1 {
		t.Fatalf("metrics %v", got)
	}
}

// TestJobConfigFromEnvReportsEverything: every bad or missing variable
// of a job function is named at once.
func TestJobConfigFromEnvReportsEverything(t *testing.T) {
	env := map[string]string{EnvFunction: FunctionSnapshot, EnvEnv: "Prod!", EnvSnapshotSigningKey: "not base64", EnvSnapshotKeyID: "bad key"}
	_, err := JobConfigFromEnv(func(k string) string { return env[k] }, aws.Config{})
	for _, want := range []string{EnvSnapshotBucket, EnvSnapshotSigningKey, EnvSnapshotKeyID, "env \"Prod!\"", "AWS_REGION"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	env = map[string]string{EnvFunction: FunctionOutbox, EnvEnv: "prod"}
	if _, err := JobConfigFromEnv(func(k string) string { return env[k] }, aws.Config{Region: "us-east-1"}); err == nil || !strings.Contains(err.Error(), EnvAccountID) {
		t.Errorf("outbox without an account: %v", err)
	}
	env = map[string]string{EnvFunction: "cron", EnvEnv: "prod"}
	if _, err := JobConfigFromEnv(func(k string) string { return env[k] }, aws.Config{Region: "us-east-1"}); err == nil || !strings.Contains(err.Error(), FunctionAuditor) {
		t.Errorf("unknown function: %v", err)
	}
	env = map[string]string{EnvFunction: FunctionSnapshot, EnvEnv: "prod", EnvSnapshotBucket: "snavio-snapshots",
		EnvSnapshotSigningKey: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))}
	c, err := JobConfigFromEnv(func(k string) string { return env[k] }, aws.Config{Region: "us-east-1"})
	if err != nil || c.SnapshotKeyID != DefaultSnapshotKeyID || len(c.SnapshotKey) != ed25519.PrivateKeySize {
		t.Fatalf("good snapshot config: %+v %v", c, err)
	}
}
