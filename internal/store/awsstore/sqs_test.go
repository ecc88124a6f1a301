package awsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

var testMaster = bytes.Repeat([]byte{7}, provenance.MinMasterLen)

func testSigner(t testing.TB) *provenance.Signer {
	t.Helper()
	s, err := provenance.NewSigner(testMaster)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newSQSSender makes a sender on the binary's kumo, counting calls in c
// (nil: not counted), and a plain client for the test's own calls.
func newSQSSender(t testing.TB, c *awstest.Calls, adjust func(*Config)) (*SQSSender, *sqs.Client) {
	t.Helper()
	k := emu.Kumo()
	cfg := Config{Env: "test", AWSConfig: k.Config(), SQSOptions: k.SQSOptions()}
	raw := sqs.NewFromConfig(cfg.AWSConfig, cfg.SQSOptions...)
	if c != nil {
		cfg.SQSOptions = append(slices.Clip(cfg.SQSOptions), func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, c.Count) })
	}
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := NewSQSSender(cfg, testSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, raw
}

// createQueue makes a queue with a name unique in the process (kumo's
// state is shared by every server in it) and returns its ARN.
func createQueue(t testing.TB, raw *sqs.Client) string {
	t.Helper()
	ctx := context.Background()
	name := "q-" + emu.UniqueName()
	out, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := raw.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// queueURLOf is the URL of a queue of the test's, by its ARN.
func queueURLOf(t testing.TB, raw *sqs.Client, arn string) *string {
	t.Helper()
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	u, err := raw.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return u.QueueUrl
}

func delivery(arn, id string) *dispatch.Delivery {
	return &dispatch.Delivery{
		QueueARN: arn, Body: []byte(`{"command":{"id":"` + id + `","source":"acme/web"}}`),
		CommandID: id, Source: "acme/web", Target: "billing", Command: "charge-card",
	}
}

// receiveAll reads every message of the queue, with its attributes.
func receiveAll(t *testing.T, raw *sqs.Client, arn string) []types.Message {
	t.Helper()
	ctx := context.Background()
	u := queueURLOf(t, raw, arn)
	var out []types.Message
	for {
		got, err := raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: u, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		out = append(out, got.Messages...)
	}
}

func attributes(m types.Message) map[string]string {
	out := map[string]string{}
	for k, v := range m.MessageAttributes {
		if aws.ToString(v.DataType) != "String" {
			out[k] = "not a String: " + aws.ToString(v.DataType)
			continue
		}
		out[k] = aws.ToString(v.StringValue)
	}
	return out
}

// TestSQSSenderDelivers: the message on the queue is the body, with the
// attributes of the local sender and a delivery signature the target's
// key verifies.
func TestSQSSenderDelivers(t *testing.T) {
	ctx := context.Background()
	s, raw := newSQSSender(t, nil, nil)
	arn := createQueue(t, raw)
	d := delivery(arn, "0f8fad5b-d9cb-469f-a165-70867728950e")
	body := bytes.Clone(d.Body)
	d.Completed, d.EventWritten = true, true
	if err := s.Send(ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.Completed || d.EventWritten {
		t.Error("the SQS sender claimed to complete the claim or write the event; the dispatcher must do both")
	}
	d.Body[0] = 'X' // the dispatcher reuses the buffer after Send
	msgs := receiveAll(t, raw, arn)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	got := attributes(msgs[0])
	if aws.ToString(msgs[0].Body) != string(body) {
		t.Fatalf("body %q, want %q", aws.ToString(msgs[0].Body), body)
	}
	want := map[string]string{
		provenance.AttrCommandID: d.CommandID, provenance.AttrSource: d.Source, provenance.AttrTarget: d.Target,
		provenance.AttrCommand: d.Command, provenance.AttrKeyID: testSigner(t).ID(), provenance.AttrSignature: got[provenance.AttrSignature],
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attributes\n %v\nwant\n %v", got, want)
	}
	key, err := testSigner(t).Key("billing")
	if err != nil {
		t.Fatal(err)
	}
	m := provenance.FromAttributes(got, []byte(aws.ToString(msgs[0].Body)))
	if err := provenance.Verify(key, &m); err != nil {
		t.Fatalf("the delivered message does not verify: %v", err)
	}
}

// TestSQSSenderCallsPerDelivery counts SQS calls with an SDK middleware:
// one SendMessage per delivery once the queue's URL is cached.
func TestSQSSenderCallsPerDelivery(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s, raw := newSQSSender(t, &c, nil)
	arn := createQueue(t, raw)
	c.Take().Ops()
	n := 0
	send := func() error { n++; return s.Send(ctx, delivery(arn, fmt.Sprint("id-", n))) }
	checkCalls(t, &c, []callCase{
		{"first delivery to a queue", send, map[string]int{"GetQueueUrl": 1, "SendMessage": 1}},
		{"next delivery", send, map[string]int{"SendMessage": 1}},
		{"and the next", send, map[string]int{"SendMessage": 1}},
	})
	if _, err := raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: queueURLOf(t, raw, arn)}); err != nil {
		t.Fatal(err)
	}
	c.Take().Ops()
	if err := send(); err == nil || !strings.Contains(err.Error(), "create the queue") {
		t.Fatalf("delivery to a deleted queue: %v; want an error saying to create it", err)
	}
	if got := c.Take().Ops().String(); got != "SendMessage=1" {
		t.Errorf("delivery to a deleted queue: calls %s", got)
	}
	if err := send(); err == nil || !strings.Contains(err.Error(), "resolve the queue URL") {
		t.Fatalf("delivery after the URL was dropped: %v", err)
	}
	if got := c.Take().Ops().String(); got != "GetQueueUrl=1" {
		t.Errorf("the deleted queue's URL stayed cached: calls %s", got)
	}
}

func TestSQSSenderCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s, raw := newSQSSender(t, &c, func(cfg *Config) { cfg.MaxQueueURLs = 2 })
	arns := []string{createQueue(t, raw), createQueue(t, raw), createQueue(t, raw)}
	c.Take().Ops()
	for round := range 2 {
		for i, arn := range arns {
			if err := s.Send(ctx, delivery(arn, fmt.Sprint("id-", round, i))); err != nil {
				t.Fatal(err)
			}
			if n := s.cache.len(); n > 2 {
				t.Fatalf("%d cached URLs, bound 2", n)
			}
		}
	}
	got := c.Take().Ops()
	if got["SendMessage"] != 6 || got["GetQueueUrl"] < 4 {
		t.Errorf("calls %s: want 6 SendMessage and at least 4 GetQueueUrl (3 queues through 2 places)", got.String())
	}
	for _, arn := range arns {
		if n := len(receiveAll(t, raw, arn)); n != 2 {
			t.Errorf("%s holds %d messages, want 2", arn, n)
		}
	}
}

func TestSQSSenderBadInput(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s, raw := newSQSSender(t, &c, nil)
	arn := createQueue(t, raw)
	c.Take().Ops()
	for _, tc := range []struct {
		name string
		d    *dispatch.Delivery
		want string
	}{
		{"local queue", delivery("arn:snavio:sqs:local:000000000000:billing", "i"), "local dispatch serve"},
		{"FIFO queue", delivery("arn:aws:sqs:us-east-1:000000000000:billing.fifo", "i"), "FIFO"},
		{"not an ARN", delivery("https://sqs.us-east-1.amazonaws.com/1/q", "i"), "not an SQS queue ARN"},
		{"unsigned", &dispatch.Delivery{QueueARN: arn, Body: []byte("{}"), Target: "billing"}, "signing the delivery"},
	} {
		if err := s.Send(ctx, tc.d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
		if got := c.Take().Ops(); got["SendMessage"] != 0 {
			t.Errorf("%s: sent anyway (%s)", tc.name, got.String())
		}
	}
	if _, err := NewSQSSender(Config{Env: "test", AWSConfig: aws.Config{Region: "us-east-1"}}, nil); err == nil || !strings.Contains(err.Error(), "signer") {
		t.Errorf("a sender without a signer: %v", err)
	}
	if _, err := NewSQSSender(Config{Env: "test", AWSConfig: aws.Config{Region: "us-east-1"}, MaxQueueURLs: -1}, testSigner(t)); err == nil || !strings.Contains(err.Error(), "max queue URLs") {
		t.Errorf("a negative cache bound: %v", err)
	}
}

// Fakes of single SQS operations, recording the region each call goes to.
type fakeSQS struct {
	regions []string
	sendErr error
}

func (f *fakeSQS) region(opts []func(*sqs.Options)) {
	o := sqs.Options{Region: "us-east-1"}
	for _, fn := range opts {
		fn(&o)
	}
	f.regions = append(f.regions, o.Region)
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.region(opts)
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://example/" + aws.ToString(in.QueueOwnerAWSAccountId) + "/" + aws.ToString(in.QueueName))}, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.region(opts)
	return &sqs.SendMessageOutput{}, f.sendErr
}

// TestSQSSenderOtherRegionAndAccount: a queue of another region is called
// in its own region, and its owner's account is asked for its URL.
func TestSQSSenderOtherRegionAndAccount(t *testing.T) {
	f := &fakeSQS{}
	s := &SQSSender{send: f, urls: f, sign: testSigner(t), region: "us-east-1", cache: newBounded[*queueURL](10)}
	for _, arn := range []string{"arn:aws:sqs:eu-west-1:123456789012:billing", "arn:aws:sqs:us-east-1:123456789012:billing"} {
		if err := s.Send(context.Background(), delivery(arn, "i")); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"eu-west-1", "eu-west-1", "us-east-1", "us-east-1"}; !slices.Equal(f.regions, want) {
		t.Fatalf("regions %v, want %v", f.regions, want)
	}
	if q, _ := s.cache.get("arn:aws:sqs:eu-west-1:123456789012:billing"); q == nil || q.url != "https://example/123456789012/billing" {
		t.Fatalf("cached %+v", q)
	}
	// A failure other than a missing queue keeps the URL.
	f.sendErr = errors.New("throttled")
	if err := s.Send(context.Background(), delivery("arn:aws:sqs:us-east-1:123456789012:billing", "i")); err == nil {
		t.Fatal("a failed SendMessage was not an error")
	}
	if _, ok := s.cache.get("arn:aws:sqs:us-east-1:123456789012:billing"); !ok {
		t.Fatal("a throttled send dropped the URL")
	}
	// SQS's typed missing-queue error (kumo sends only the query code,
	// which TestSQSSenderCallsPerDelivery covers) drops it.
	f.sendErr = &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	if err := s.Send(context.Background(), delivery("arn:aws:sqs:us-east-1:123456789012:billing", "i")); err == nil || !strings.Contains(err.Error(), "create the queue") {
		t.Fatalf("a missing queue: %v", err)
	}
	if _, ok := s.cache.get("arn:aws:sqs:us-east-1:123456789012:billing"); ok {
		t.Fatal("a missing queue's URL stayed cached")
	}
}

// BenchmarkSQSDelivery measures one delivery through the sender on kumo
// (SendMessage, URL cached) beside SendMessageBatch: of one entry, which
// is all a caller that sends one message at a time can batch, and of 10,
// per message, what batching could save if ten deliveries were ready at
// once.
func BenchmarkSQSDelivery(b *testing.B) {
	ctx := context.Background()
	s, raw := newSQSSender(b, nil, nil)
	arn := createQueue(b, raw)
	d := delivery(arn, "0f8fad5b-d9cb-469f-a165-70867728950e")
	b.Run("Send", func(b *testing.B) {
		for b.Loop() {
			if err := s.Send(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SendMessageBatch", func(b *testing.B) {
		q, err := s.resolve(ctx, arn)
		if err != nil {
			b.Fatal(err)
		}
		m := provenance.Message{CommandID: d.CommandID, Source: d.Source, Target: d.Target, Command: d.Command, Body: d.Body}
		if err := s.sign.Sign(&m); err != nil {
			b.Fatal(err)
		}
		attrs := map[string]types.MessageAttributeValue{}
		for k, v := range m.Attributes() {
			attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		entries := make([]types.SendMessageBatchRequestEntry, 10)
		for i := range entries {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(string(d.Body)), MessageAttributes: attrs}
		}
		b.Run("Entries1", func(b *testing.B) {
			for b.Loop() {
				out, err := raw.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries[:1]})
				if err != nil || len(out.Failed) > 0 {
					b.Fatal(err, out.Failed)
				}
			}
		})
		b.Run("Entries10PerMessage", func(b *testing.B) {
			began := time.Now()
			batches := 0
			for i := 0; b.Loop(); i++ {
				if i%10 != 0 {
					continue
				}
				batches++
				out, err := raw.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
				if err != nil || len(out.Failed) > 0 {
					b.Fatal(err, out.Failed)
				}
			}
			b.ReportMetric(float64(time.Since(began).Microseconds())/float64(max(batches, 1)), "µs/batch")
		})
	})
}
