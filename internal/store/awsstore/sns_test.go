package awsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// kumoAccount is the account of every ARN kumo makes.
const kumoAccount = "000000000000"

func telemetryMessage(t testing.TB, tenant string, seq uint64) TelemetryMessage {
	t.Helper()
	e := telemetry.Delivered{CommandID: fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", seq), Source: tenant + "/web", Target: "billing",
		CommandName: "charge-card", Timestamp: t0.Format(time.RFC3339Nano), Path: telemetry.PathFast}
	b, err := telemetry.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return TelemetryMessage{Tenant: tenant, Seq: seq, Name: e.EventName(), Event: b}
}

// TestSNSPublishFanOutOnKumo publishes through kumo to each tenant's
// topic and reads what SNS delivers to the tenant's subscribed SQS queue:
// the Notification envelope around the event, with its attributes.
func TestSNSPublishFanOutOnKumo(t *testing.T) {
	ctx := context.Background()
	k := emu.Kumo()
	var c awstest.Calls
	cfg := Config{Env: emu.UniqueName(), AccountID: kumoAccount, AWSConfig: k.Config(),
		SNSOptions: append(k.SNSOptions(), func(o *sns.Options) { o.APIOptions = append(o.APIOptions, c.Count) })}
	p, err := NewSNSPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rawSNS := sns.NewFromConfig(k.Config(), k.SNSOptions()...)
	rawSQS := sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
	queues := map[string]string{}
	for _, tenant := range []string{"acme.web_1", "globex"} {
		name := cfg.TopicPrefix() + must(topicPart(tenant))
		topic, err := rawSNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := p.TopicARN(tenant); aws.ToString(topic.TopicArn) != want {
			t.Fatalf("topic ARN %s, the publisher computes %s", aws.ToString(topic.TopicArn), want)
		}
		queues[tenant] = createQueue(t, rawSQS)
		if _, err := rawSNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(queues[tenant])}); err != nil {
			t.Fatal(err)
		}
	}
	acme := telemetryMessage(t, "acme.web_1", 7)
	c.Take().Ops()
	if failed := p.Publish(ctx, []TelemetryMessage{acme, telemetryMessage(t, "globex", 1)}); len(failed) > 0 {
		t.Fatalf("failed: %+v", failed)
	}
	if got := c.Take().Ops().String(); got != "Publish=2" {
		t.Errorf("calls %s, want Publish=2 (one event per tenant: no batch)", got)
	}
	msgs := receiveAll(t, rawSQS, queues["acme.web_1"])
	if len(msgs) != 1 {
		t.Fatalf("acme's queue holds %d messages, want 1 (its own event only)", len(msgs))
	}
	var env struct {
		Type, MessageId, TopicArn, Message, Timestamp, SignatureVersion, Signature, SigningCertURL, UnsubscribeURL string
		MessageAttributes                                                                                          map[string]struct{ Type, Value string }
	}
	if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &env); err != nil {
		t.Fatalf("the queue's message is not an SNS envelope: %v\n%s", err, aws.ToString(msgs[0].Body))
	}
	wantTopic, _ := p.TopicARN("acme.web_1")
	if env.Type != "Notification" || env.TopicArn != wantTopic || env.MessageId == "" || env.Timestamp == "" {
		t.Fatalf("envelope %+v", env)
	}
	if env.Message != string(acme.Event) {
		t.Fatalf("Message %s, want the event %s", env.Message, acme.Event)
	}
	if e, err := telemetry.Unmarshal([]byte(env.Message)); err != nil || e.EventName() != acme.Name {
		t.Fatalf("the delivered event does not decode: %v %v", e, err)
	}
	want := map[string]struct{ Type, Value string }{
		AttrEvent: {"String", acme.Name}, AttrTenant: {"String", "acme.web_1"}, AttrSeq: {"Number", "7"},
	}
	if fmt.Sprint(env.MessageAttributes) != fmt.Sprint(want) {
		t.Fatalf("attributes %v, want %v", env.MessageAttributes, want)
	}
	if n := len(receiveAll(t, rawSQS, queues["globex"])); n != 1 {
		t.Fatalf("globex's queue holds %d messages, want 1", n)
	}

	// A tenant without a topic: a failure that says what to do, and that
	// does not hold back the other tenant.
	failed := p.Publish(ctx, []TelemetryMessage{telemetryMessage(t, "nobody", 1), telemetryMessage(t, "globex", 2)})
	if len(failed) != 1 || failed[0].Index != 0 || failed[0].Retryable || !strings.Contains(failed[0].Message, "create the tenant's telemetry topic") {
		t.Fatalf("publish to a missing topic: %+v", failed)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// fakeSNS is an httptest stand-in for SNS's query protocol, for
// PublishBatch, which kumo lacks. It parses the SDK's real requests,
// records them, and answers as SNS documents it; fail picks entries to
// refuse and skip entries to leave unanswered.
type fakeSNS struct {
	t    *testing.T
	mu   sync.Mutex
	reqs []fakeRequest
	fail func(call int, id string) bool
	skip func(call int, id string) bool
}

type fakeRequest struct {
	Action, Topic string
	Entries       []fakeEntry
}

type fakeEntry struct {
	ID, Message string
	Attrs       map[string]string // name -> DataType:StringValue
}

func (f *fakeSNS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := f.t
	if ct := r.Header.Get("Content-Type"); r.Method != http.MethodPost || !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		t.Errorf("request %s with Content-Type %q, want a form POST", r.Method, ct)
	}
	if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=snavioTest/") || !strings.Contains(a, "/us-east-1/sns/aws4_request") {
		t.Errorf("Authorization %q is not a SigV4 signature for sns in us-east-1", a)
	}
	if err := r.ParseForm(); err != nil {
		t.Error(err)
	}
	form := r.PostForm
	if form.Get("Version") != "2010-03-31" {
		t.Errorf("Version %q", form.Get("Version"))
	}
	req := fakeRequest{Action: form.Get("Action"), Topic: form.Get("TopicArn")}
	attrs := func(prefix string) map[string]string {
		out := map[string]string{}
		for j := 1; form.Has(fmt.Sprintf("%sMessageAttributes.entry.%d.Name", prefix, j)); j++ {
			p := fmt.Sprintf("%sMessageAttributes.entry.%d.", prefix, j)
			out[form.Get(p+"Name")] = form.Get(p+"Value.DataType") + ":" + form.Get(p+"Value.StringValue")
		}
		return out
	}
	switch req.Action {
	case "Publish":
		req.Entries = []fakeEntry{{Message: form.Get("Message"), Attrs: attrs("")}}
	case "PublishBatch":
		for i := 1; form.Has(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Id", i)); i++ {
			p := fmt.Sprintf("PublishBatchRequestEntries.member.%d.", i)
			req.Entries = append(req.Entries, fakeEntry{ID: form.Get(p + "Id"), Message: form.Get(p + "Message"), Attrs: attrs(p)})
		}
	default:
		t.Errorf("unexpected action %q", req.Action)
	}
	f.mu.Lock()
	call := len(f.reqs)
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	var b strings.Builder
	if req.Action == "Publish" {
		fmt.Fprintf(&b, `<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult><MessageId>m-%d</MessageId></PublishResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishResponse>`, call)
		_, _ = w.Write([]byte(b.String()))
		return
	}
	b.WriteString(`<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult><Successful>`)
	var failed []string
	for _, e := range req.Entries {
		switch {
		case f.skip != nil && f.skip(call, e.ID):
		case f.fail != nil && f.fail(call, e.ID):
			failed = append(failed, e.ID)
		default:
			fmt.Fprintf(&b, `<member><Id>%s</Id><MessageId>m-%d-%s</MessageId></member>`, e.ID, call, e.ID)
		}
	}
	b.WriteString(`</Successful><Failed>`)
	for _, id := range failed {
		fmt.Fprintf(&b, `<member><Id>%s</Id><Code>InternalError</Code><Message>try again</Message><SenderFault>false</SenderFault></member>`, id)
	}
	b.WriteString(`</Failed></PublishBatchResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishBatchResponse>`)
	_, _ = w.Write([]byte(b.String()))
}

func newFakeSNSPublisher(t *testing.T, f *fakeSNS) *SNSPublisher {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p, err := NewSNSPublisher(Config{Env: "prod", AccountID: "123456789012", AWSConfig: emu.Kumo().Config(),
		SNSOptions: []func(*sns.Options){func(o *sns.Options) { o.BaseEndpoint = aws.String(srv.URL) }}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSNSPublishBatchRequests checks the SDK's real PublishBatch requests
// against an httptest fake: batches of 10 per tenant in order, a single
// event with Publish, per-entry failures mapped to the caller's messages.
func TestSNSPublishBatchRequests(t *testing.T) {
	f := &fakeSNS{
		fail: func(call int, id string) bool { return call == 1 && id == "1" },
		skip: func(call int, id string) bool { return call == 2 && id == "2" },
	}
	p := newFakeSNSPublisher(t, f)
	var msgs []TelemetryMessage
	for i := range 23 {
		msgs = append(msgs, telemetryMessage(t, "acme", uint64(i+1)))
		if i == 4 {
			msgs = append(msgs, telemetryMessage(t, "globex", 9))
			bad := telemetryMessage(t, "acme", 0) // no sequence number
			msgs = append(msgs, bad)
			msgs = append(msgs, telemetryMessage(t, "acme/../x", 1))
		}
	}
	failed := p.Publish(context.Background(), msgs)

	var shape []string
	for _, r := range f.reqs {
		shape = append(shape, fmt.Sprintf("%s %s %d", r.Action, r.Topic[strings.LastIndexByte(r.Topic, ':')+1:], len(r.Entries)))
	}
	want := []string{
		"PublishBatch snavio-prod-telemetry-acme 10",
		"PublishBatch snavio-prod-telemetry-acme 10",
		"PublishBatch snavio-prod-telemetry-acme 3",
		"Publish snavio-prod-telemetry-globex 1",
	}
	if !slices.Equal(shape, want) {
		t.Fatalf("requests\n %s\nwant\n %s", strings.Join(shape, "\n "), strings.Join(want, "\n "))
	}
	if f.reqs[0].Topic != "arn:aws:sns:us-east-1:123456789012:snavio-prod-telemetry-acme" {
		t.Errorf("topic ARN %s", f.reqs[0].Topic)
	}
	// Entries go out in the tenant's order, each with its event and the
	// three attributes.
	var seqs []string
	for _, r := range f.reqs[:3] {
		for _, e := range r.Entries {
			seqs = append(seqs, strings.TrimPrefix(e.Attrs[AttrSeq], "Number:"))
			if !strings.Contains(e.Message, `"snavio.command.delivered"`) || e.Attrs[AttrEvent] != "String:snavio.command.delivered" || e.Attrs[AttrTenant] != "String:acme" || len(e.Attrs) != 3 {
				t.Fatalf("entry %+v", e)
			}
		}
	}
	if strings.Join(seqs, ",") != "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23" {
		t.Fatalf("seqs in order %s", strings.Join(seqs, ","))
	}
	// Failures: the two refused by the store, entry 1 of the second batch
	// (acme seq 12), entry 2 of the third (acme seq 23) left unanswered.
	var got []string
	for _, fl := range failed {
		m := msgs[fl.Index]
		got = append(got, fmt.Sprintf("%s/%d %s %v", m.Tenant, m.Seq, fl.Code, fl.Retryable))
	}
	slices.Sort(got)
	wantFailed := []string{"acme/0 InvalidMessage false", "acme/12 InternalError true", "acme/23 Unanswered true", "acme/../x/1 InvalidTenant false"}
	slices.Sort(wantFailed)
	if !slices.Equal(got, wantFailed) {
		t.Fatalf("failures\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(wantFailed, "\n "))
	}
}

// TestSNSPublishBatchBytes: a batch also stops at SNS's 256 KiB.
func TestSNSPublishBatchBytes(t *testing.T) {
	f := &fakeSNS{}
	p := newFakeSNSPublisher(t, f)
	var msgs []TelemetryMessage
	for i := range 5 {
		m := telemetryMessage(t, "acme", uint64(i+1))
		m.Event = append(bytes.Repeat([]byte(" "), 60<<10), m.Event...)
		msgs = append(msgs, m)
	}
	big := telemetryMessage(t, "acme", 6)
	big.Event = bytes.Repeat([]byte("x"), snsMaxBytes)
	msgs = append(msgs, big)
	failed := p.Publish(context.Background(), msgs)
	if len(failed) != 1 || failed[0].Index != 5 || failed[0].Retryable || !strings.Contains(failed[0].Message, "over SNS's") {
		t.Fatalf("failures %+v; want the oversized event only", failed)
	}
	var sizes []int
	for _, r := range f.reqs {
		sizes = append(sizes, len(r.Entries))
	}
	if !slices.Equal(sizes, []int{4, 1}) {
		t.Fatalf("batches of %v, want [4 1] (4 x 60 KiB fit in 256 KiB)", sizes)
	}
}

func TestSNSPublisherConfig(t *testing.T) {
	for _, tc := range []struct {
		account, want string
	}{{"", "no account id"}, {"12345", "12-digit"}} {
		_, err := NewSNSPublisher(Config{Env: "prod", AccountID: tc.account, AWSConfig: aws.Config{Region: "us-east-1"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("account %q: %v; want an error saying %q", tc.account, err, tc.want)
		}
	}
	for region, want := range map[string]string{"cn-north-1": "arn:aws-cn:sns:cn-north-1:", "us-gov-west-1": "arn:aws-us-gov:sns:us-gov-west-1:", "eu-west-1": "arn:aws:sns:eu-west-1:"} {
		p, err := NewSNSPublisher(Config{Env: "prod", AccountID: "123456789012", AWSConfig: aws.Config{Region: region}})
		if err != nil {
			t.Fatal(err)
		}
		if arn, _ := p.TopicARN("acme"); arn != want+"123456789012:snavio-prod-telemetry-acme" {
			t.Errorf("%s: %s", region, arn)
		}
	}
}

// FuzzTopicPart: distinct tenants never share a topic, and an accepted
// tenant's topic name uses only what SNS allows.
func FuzzTopicPart(f *testing.F) {
	f.Add("acme", "acme")
	f.Add("a.b", "a_b")
	f.Add("a__b", "a_d")
	f.Add("a._", "a_._")
	f.Fuzz(func(t *testing.T, a, b string) {
		pa, ea := topicPart(a)
		pb, eb := topicPart(b)
		if ea == nil && eb == nil && pa == pb && a != b {
			t.Fatalf("tenants %q and %q share topic part %q", a, b, pa)
		}
		if ea != nil {
			return
		}
		if len("snavio-"+strings.Repeat("e", 32)+"-telemetry-"+pa) > 256 {
			t.Fatalf("tenant %q makes a topic name over 256 characters", a)
		}
		for _, c := range pa {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("tenant %q: topic part %q has %q", a, pa, c)
			}
		}
	})
}
