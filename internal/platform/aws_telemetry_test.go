package platform

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

func TestTelemetryAttributesAreTheOutboxs(t *testing.T) {
	if attrEvent != awsstore.AttrEvent || attrTenant != awsstore.AttrTenant || attrSeq != awsstore.AttrSeq {
		t.Fatal("the message attributes differ from awsstore's SNSPublisher")
	}
}

// tenantTopic is an on-boarded tenant on kumo, as `snavio tenant apply`
// leaves it: its topic and its own telemetry queue subscribed to it.
type tenantTopic struct {
	env, tenant, topicARN, ownQueueURL string
	target                             Target
	pub                                *awsstore.SNSPublisher
	sqs                                *sqs.Client
	sns                                *sns.Client
}

func onboard(t *testing.T, k *awstest.Kumo, tenant string) *tenantTopic {
	t.Helper()
	ctx := context.Background()
	env := emu.UniqueName()
	tt := &tenantTopic{env: env, tenant: tenant, sqs: sqs.NewFromConfig(k.Config(), k.SQSOptions()...), sns: sns.NewFromConfig(k.Config(), k.SNSOptions()...)}
	tp, err := tt.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: awssdk.String("snavio-" + env + "-telemetry-" + tenant)})
	if err != nil {
		t.Fatal(err)
	}
	tt.topicARN = awssdk.ToString(tp.TopicArn)
	q, err := tt.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("snavio-" + env + "-telemetry-" + tenant)})
	if err != nil {
		t.Fatal(err)
	}
	tt.ownQueueURL = awssdk.ToString(q.QueueUrl)
	if _, err := tt.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: awssdk.String("sqs"),
		Endpoint: awssdk.String("arn:aws:sqs:us-east-1:000000000000:snavio-" + env + "-telemetry-" + tenant)}); err != nil {
		t.Fatal(err)
	}
	tt.pub, err = awsstore.NewSNSPublisher(awsstore.Config{Env: env, AWSConfig: k.Config(), SNSOptions: k.SNSOptions(), AccountID: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	tt.target = Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", EmitRoleARN: "arn:aws:iam::000000000000:role/snavio/" + env + "/emit/snavio-" + env + "-emit-" + tenant}
	return tt
}

// publish publishes events of the tenant with seqs, as the outbox does.
func (tt *tenantTopic) publish(t *testing.T, seqs ...uint64) {
	t.Helper()
	for _, s := range seqs {
		ev := `{"event":"snavio.command.delivered","command_id":"c-` + strconv.FormatUint(s, 10) + `","source":"` + tt.tenant + `/billing","target":"mailer","command_name":"send","path":"fast"}`
		if f := tt.pub.Publish(context.Background(), []awsstore.TelemetryMessage{{Tenant: tt.tenant, Seq: s, Name: "snavio.command.delivered", Event: []byte(ev)}}); len(f) > 0 {
			t.Fatalf("publish %d: %+v", s, f)
		}
	}
}

func seqs(recs []wire.TelemetryRecord) []uint64 {
	var out []uint64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func TestAWSTelemetryReadsATemporaryQueue(t *testing.T) {
	callerEnv(t)
	k := emu.Kumo()
	ctx := context.Background()
	tt := onboard(t, k, "acme")
	// The fake clock starts at the real time: the reader sweeps kumo's
	// queues by their tags, which other tests write with the real clock.
	start := time.Now().UTC().Truncate(time.Second)
	clk := clock.NewFake(start)
	var calls awstest.Calls
	var notices []string
	a, err := OpenAWSTelemetry(ctx, tt.target, "acme", AWSTelemetryOptions{Clock: clk, Owner: "tester@host pid 1", APIOptions: []func(*middleware.Stack) error{calls.Count},
		Notice: func(m string) { notices = append(notices, m) }})
	if err != nil {
		t.Fatal(err)
	}
	setup := calls.Take()
	want := map[string]int{"SQS.ListQueues": 1, "SQS.CreateQueue": 1, "SQS.GetQueueAttributes": 1, "SQS.SetQueueAttributes": 1, "SNS.Subscribe": 1, "SQS.TagQueue": 1}
	for op, n := range want {
		if setup[op] != n {
			t.Errorf("set-up calls %v, want %v plus ListQueueTags per listed queue", setup, want)
			break
		}
	}
	prefix, _ := (stack.Names{Env: tt.env}).TailQueuePrefix("acme")
	if a.TopicARN() != tt.topicARN || !strings.HasPrefix(a.Queue(), prefix) || len(a.Queue()) != len(prefix)+stack.TailQueueSuffixLen {
		t.Fatalf("topic %s queue %s", a.TopicARN(), a.Queue())
	}
	qurl, err := tt.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(a.Queue())})
	if err != nil {
		t.Fatal(err)
	}
	tags, _ := tt.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: qurl.QueueUrl})
	if tags.Tags[TagTail] != "tester@host pid 1" || tags.Tags[TagTailCreated] != start.Format(time.RFC3339) || !strings.HasPrefix(tags.Tags[TagTailSubscription], tt.topicARN+":") || tags.Tags[TagTailTenant] != "acme" {
		t.Errorf("tags %v", tags.Tags)
	}
	attrs, _ := tt.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: qurl.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"Policy"}})
	if p := attrs.Attributes["Policy"]; !strings.Contains(p, `"aws:SourceArn":["`+tt.topicARN+`"]`) || !strings.Contains(p, "sns.amazonaws.com") {
		t.Errorf("policy %s", p)
	}

	read := func() []wire.TelemetryRecord {
		t.Helper()
		p, err := a.ReadTelemetry(ctx, wire.TelemetryQuery{Tenant: "acme", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !p.ServerTime.Equal(clk.Now()) {
			t.Errorf("server time %v", p.ServerTime)
		}
		return p.Records
	}
	// Out of order: 1, 2, 4, 3. Nothing is handed over until the window
	// passed, then all in order.
	tt.publish(t, 1, 2, 4, 3)
	if r := read(); len(r) != 0 {
		t.Fatalf("handed over %v before the reorder window", seqs(r))
	}
	if c := calls.Take(); c["SQS.ReceiveMessage"] != 1 || c["SQS.DeleteMessageBatch"] != 1 || c.Total() != 2 {
		t.Errorf("calls of a poll that received: %v", c)
	}
	clk.Advance(DefaultReorderWindow)
	r := read()
	if got := seqs(r); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Fatalf("records %v, want 1 2 3 4", got)
	}
	var ev map[string]any
	if err := json.Unmarshal(r[0].Event, &ev); err != nil || ev["command_id"] != "c-1" || r[0].Tenant != "acme" || r[0].At.IsZero() {
		t.Errorf("record %+v", r[0])
	}
	// 6 without 5: held for the window, then handed over (the Follower
	// reports 5 as a gap); 5 arriving after is late and dropped.
	tt.publish(t, 6)
	if r := read(); len(r) != 0 {
		t.Fatalf("handed over %v while waiting for 5", seqs(r))
	}
	clk.Advance(DefaultReorderWindow)
	if got := seqs(read()); len(got) != 1 || got[0] != 6 {
		t.Fatalf("records %v, want 6", got)
	}
	tt.publish(t, 5, 6)
	if r := read(); len(r) != 0 {
		t.Fatalf("handed over %v", seqs(r))
	}
	if s := a.Stats(); s.Late != 1 || s.Redelivered != 1 {
		t.Errorf("stats %+v, want 1 late (5) and 1 redelivered (6)", s)
	}
	// A message that is not a telemetry event is rejected, not handed over.
	if _, err := tt.sns.Publish(ctx, &sns.PublishInput{TopicArn: awssdk.String(tt.topicARN), Message: awssdk.String(`{"event":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultReorderWindow)
	if r := read(); len(r) != 0 {
		t.Fatalf("handed over %v", seqs(r))
	}
	if s := a.Stats(); s.Rejected != 1 || len(notices) != 2 || !strings.Contains(notices[1], "snavio.seq") {
		t.Errorf("stats %+v notices %q", s, notices)
	}
	// An hour later the next read refreshes the alive tag.
	clk.Advance(time.Hour)
	calls.Take()
	read()
	if c := calls.Take(); c["SQS.TagQueue"] != 1 {
		t.Errorf("calls %v, want the alive tag refreshed", c)
	}

	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := calls.Take(); c["SNS.Unsubscribe"] != 1 || c["SQS.DeleteQueue"] != 1 || c.Total() != 2 {
		t.Errorf("close calls %v", c)
	}
	if _, err := tt.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(a.Queue())}); err == nil {
		t.Error("the temporary queue is still there")
	}
	subs, _ := tt.sns.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: awssdk.String(tt.topicARN)})
	if len(subs.Subscriptions) != 1 {
		t.Errorf("subscriptions %d, want the tenant's own only", len(subs.Subscriptions))
	}
	if _, err := a.ReadTelemetry(ctx, wire.TelemetryQuery{}); err == nil {
		t.Error("read after close")
	}
	// The tenant's own queue got every message: tail took none of them.
	ga, _ := tt.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(tt.ownQueueURL), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
	if n := ga.Attributes["ApproximateNumberOfMessages"]; n != "8" {
		t.Errorf("the tenant's own queue holds %s messages, want 8 (all published)", n)
	}
}

func TestAWSTelemetryNamesWhatIsMissing(t *testing.T) {
	callerEnv(t)
	k := emu.Kumo()
	ctx := context.Background()
	env := emu.UniqueName()
	target := Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", EmitRoleARN: "arn:aws:iam::000000000000:role/snavio/" + env + "/emit/snavio-" + env + "-emit-acme"}
	_, err := OpenAWSTelemetry(ctx, target, "acme", AWSTelemetryOptions{})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "Subscribe" || !strings.Contains(err.Error(), "has no telemetry topic arn:aws:sns:us-east-1:000000000000:snavio-"+env+"-telemetry-acme") {
		t.Fatalf("error %v", err)
	}
	// The queue made before the subscription failed is removed.
	sq := sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
	acmeTail, _ := stack.Names{Env: env}.TailQueuePrefix("acme")
	lq, _ := sq.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: awssdk.String(acmeTail)})
	for _, u := range lq.QueueUrls {
		tags, _ := sq.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: awssdk.String(u)})
		if tags != nil && tags.Tags[TagTailTenant] == "acme" && strings.Contains(tags.Tags[TagTail], "pid") && tags.Tags[TagTailSubscription] == "" {
			created, _ := time.Parse(time.RFC3339, tags.Tags[TagTailCreated])
			if time.Since(created) < time.Minute {
				t.Errorf("queue %s left behind after the failed subscription", u)
			}
		}
	}
	if _, err := OpenAWSTelemetry(ctx, Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1"}, "acme", AWSTelemetryOptions{}); err == nil || !strings.Contains(err.Error(), "emit_role_arn") {
		t.Errorf("without emit_role_arn: %v", err)
	}
	if _, err := OpenAWSTelemetry(ctx, Target{Kind: "aws", Endpoint: k.Endpoint, Region: "us-east-1", EmitRoleARN: "arn:aws:iam::000000000000:role/custom"}, "acme", AWSTelemetryOptions{}); err == nil || !strings.Contains(err.Error(), "--env") {
		t.Errorf("without env: %v", err)
	}
	if _, err := OpenAWSTelemetry(ctx, target, "bad/tenant", AWSTelemetryOptions{}); err == nil {
		t.Error("bad tenant accepted")
	}
}

func TestSweepTailQueues(t *testing.T) {
	k := emu.Kumo()
	ctx := context.Background()
	sq := sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
	sn := sns.NewFromConfig(k.Config(), k.SNSOptions()...)
	now := time.Now().UTC().Truncate(time.Second)
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	id := emu.UniqueName()
	prefix, err := stack.Names{Env: id}.TailQueuePrefix("acme")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := stack.Names{Env: id}.TailQueuePrefix("acme-x")
	tp, _ := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: awssdk.String("sweep-" + id)})
	mkNamed := func(name string, tags map[string]string) string {
		q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(name), Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return awssdk.ToString(q.QueueUrl)
	}
	mk := func(name string, tags map[string]string) string { return mkNamed(prefix+name, tags) }
	sub, _ := sn.Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: awssdk.String("sqs"), Endpoint: awssdk.String("arn:aws:sqs:us-east-1:000000000000:" + prefix + "stale"), ReturnSubscriptionArn: true})
	stale := mk("stale", map[string]string{TagTail: "bob@h pid 9", TagTailCreated: ago(3 * time.Hour), TagTailAlive: ago(time.Hour), TagTailSubscription: awssdk.ToString(sub.SubscriptionArn)})
	staleCreated := mk("stale-created", map[string]string{TagTail: "bob@h pid 8", TagTailCreated: ago(time.Hour)})
	live := mk("live", map[string]string{TagTail: "ann@h pid 7", TagTailCreated: ago(3 * time.Hour), TagTailAlive: ago(5 * time.Minute)})
	foreign := mk("foreign", map[string]string{TagTailCreated: ago(48 * time.Hour)})
	untagged := mk("untagged", nil)
	unreadable := mk("unreadable", map[string]string{TagTail: "x", TagTailAlive: "yesterday"})
	// Another tenant's stale queue, whose name starts like this tenant's.
	otherStale := mkNamed(other+"stale", map[string]string{TagTail: "eve@h pid 6", TagTailCreated: ago(3 * time.Hour)})

	swept, err := SweepTailQueues(ctx, sq, sn, prefix, now, DefaultTailStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, s := range swept {
		mine = append(mine, strings.TrimPrefix(s, prefix))
	}
	if strings.Join(mine, ",") != "stale,stale-created" && strings.Join(mine, ",") != "stale-created,stale" {
		t.Errorf("swept %v, want stale and stale-created", mine)
	}
	exists := func(u string) bool {
		_, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(u)})
		return err == nil
	}
	for _, u := range []string{stale, staleCreated} {
		if exists(u) {
			t.Errorf("%s not deleted", u)
		}
	}
	for _, u := range []string{live, foreign, untagged, unreadable, otherStale} {
		if !exists(u) {
			t.Errorf("%s deleted, but it is not a stale tail queue", u)
		}
	}
	subs, _ := sn.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: tp.TopicArn})
	if len(subs.Subscriptions) != 0 {
		t.Errorf("the stale queue's subscription is left: %v", subs.Subscriptions)
	}
}

func TestDecodeTelemetryMessage(t *testing.T) {
	topic := "arn:aws:sns:us-east-1:000000000000:snavio-t-telemetry-acme"
	ev := `{"event":"snavio.command.delivered","command_id":"c1"}`
	good := map[string]MessageAttribute{attrSeq: {"Number", "7"}, attrTenant: {"String", "acme"}, attrEvent: {"String", "snavio.command.delivered"}}
	env := func(topicARN, typ string) string {
		b, _ := json.Marshal(map[string]any{"Type": typ, "TopicArn": topicARN, "Message": ev, "Timestamp": "2026-11-26T03:00:00.123Z",
			"MessageAttributes": map[string]any{attrSeq: map[string]string{"Type": "Number", "Value": "8"}, attrTenant: map[string]string{"Type": "String", "Value": "acme"}, attrEvent: map[string]string{"Type": "String", "Value": "snavio.command.delivered"}}})
		return string(b)
	}
	r, err := DecodeTelemetryMessage(TelemetryMessage{Body: ev, Attributes: good, SentTimestamp: "1795658400000"}, topic, "acme")
	if err != nil || r.Seq != 7 || r.Tenant != "acme" || string(r.Event) != ev || !r.At.Equal(time.UnixMilli(1795658400000)) {
		t.Fatalf("raw: %+v %v", r, err)
	}
	r, err = DecodeTelemetryMessage(TelemetryMessage{Body: env(topic, "Notification")}, topic, "acme")
	if err != nil || r.Seq != 8 || string(r.Event) != ev || r.At.Format(time.RFC3339Nano) != "2026-11-26T03:00:00.123Z" {
		t.Fatalf("envelope: %+v %v", r, err)
	}
	with := func(k string, v MessageAttribute) map[string]MessageAttribute {
		m := map[string]MessageAttribute{}
		for a, b := range good {
			m[a] = b
		}
		if v.Type == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, c := range map[string]struct {
		body  string
		attrs map[string]MessageAttribute
		want  string
	}{
		"other topic":     {env(topic+"x", "Notification"), nil, "not " + topic},
		"confirmation":    {env(topic, "SubscriptionConfirmation"), nil, "not a Notification"},
		"not json":        {"hello", good, "not a JSON object"},
		"array":           {`[1]`, good, "not a JSON object"},
		"no event name":   {`{"command_id":"c"}`, good, `no "event"`},
		"event not str":   {`{"event":1}`, good, "not a JSON object"},
		"no seq":          {ev, with(attrSeq, MessageAttribute{}), "no snavio.seq"},
		"seq zero":        {ev, with(attrSeq, MessageAttribute{"Number", "0"}), "from 1"},
		"seq negative":    {ev, with(attrSeq, MessageAttribute{"Number", "-3"}), "from 1"},
		"seq string type": {ev, with(attrSeq, MessageAttribute{"String", "3"}), "Number"},
		"other tenant":    {ev, with(attrTenant, MessageAttribute{"String", "evil"}), "not acme"},
		"event mismatch":  {ev, with(attrEvent, MessageAttribute{"String", "snavio.command.failed"}), "does not name"},
		"empty":           {"", good, "0 bytes"},
		"huge":            {`{"event":"e","x":"` + strings.Repeat("a", maxTelemetryMessage) + `"}`, good, "bytes"},
	} {
		if _, err := DecodeTelemetryMessage(TelemetryMessage{Body: c.body, Attributes: c.attrs}, topic, "acme"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

func FuzzDecodeTelemetryMessage(f *testing.F) {
	topic := "arn:aws:sns:us-east-1:000000000000:snavio-t-telemetry-acme"
	f.Add(`{"event":"snavio.command.delivered"}`, "Number", "7", "acme", "snavio.command.delivered", "1795658400000")
	f.Add(`{"Type":"Notification","TopicArn":"`+topic+`","Message":"{\"event\":\"e\"}","MessageAttributes":{"snavio.seq":{"Type":"Number","Value":"2"},"snavio.tenant":{"Type":"String","Value":"acme"},"snavio.event":{"Type":"String","Value":"e"}}}`, "", "", "", "", "")
	f.Add(`{"Type":"Notification","Message":null}`, "Number", "1", "acme", "e", "x")
	f.Add(`{"event":"e"}`, "Number", "18446744073709551616", "acme", "e", "-1")
	f.Fuzz(func(t *testing.T, body, seqType, seq, tenant, event, sent string) {
		m := TelemetryMessage{Body: body, SentTimestamp: sent, Attributes: map[string]MessageAttribute{attrSeq: {seqType, seq}, attrTenant: {"String", tenant}, attrEvent: {"String", event}}}
		r, err := DecodeTelemetryMessage(m, topic, "acme")
		if err != nil {
			return
		}
		var head struct{ Event string }
		if r.Seq == 0 || r.Tenant != "acme" || !json.Valid(r.Event) || json.Unmarshal(r.Event, &head) != nil || head.Event == "" || len(r.Event) > maxTelemetryMessage {
			t.Fatalf("accepted a bad message: %+v", r)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("the record does not print: %v", err)
		}
	})
}

func TestReorder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := reorder{window: time.Second, held: map[uint64]held{}}
	rec := func(s uint64) wire.TelemetryRecord { return wire.TelemetryRecord{Seq: s} }
	for _, s := range []uint64{3, 2} {
		r.add(rec(s), t0)
	}
	if d, ok := r.due(t0.Add(300 * time.Millisecond)); !ok || d != 700*time.Millisecond {
		t.Errorf("due %v %v", d, ok)
	}
	if got := r.release(t0.Add(999*time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("released %v early", seqs(got))
	}
	if got := seqs(r.release(t0.Add(time.Second), 1)); len(got) != 1 || got[0] != 2 {
		t.Fatalf("limit 1: %v", got)
	}
	if !r.ready(t0.Add(time.Second)) {
		t.Error("3 is next and held but not ready")
	}
	if got := seqs(r.release(t0.Add(time.Second), 10)); len(got) != 1 || got[0] != 3 {
		t.Fatalf("%v", got)
	}
	if r.add(rec(3), t0) != addRedelivered || r.add(rec(1), t0) != addRedelivered {
		t.Error("an old seq not a redelivery")
	}
	r.add(rec(4), t0)
	if got := seqs(r.release(t0, 10)); len(got) != 1 {
		t.Errorf("the next seq waits: %v", got)
	}
}

func TestReorderUnordered(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := reorder{window: time.Hour, held: map[uint64]held{}, seen: map[uint64]bool{}}
	for _, s := range []uint64{5, 3, 5, 4} {
		r.add(wire.TelemetryRecord{Seq: s}, t0)
	}
	if !r.ready(t0) {
		t.Fatal("unordered records wait")
	}
	if got := seqs(r.release(t0, 10)); len(got) != 3 || got[0] != 5 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("released %v, want 5 3 4 (arrival order, the redelivery dropped)", got)
	}
}

// An event with lower-case "type" and "message" members is an event, not
// an SNS envelope.
func TestDecodeTelemetryMessageMatchesEnvelopeKeysExactly(t *testing.T) {
	ev := `{"event":"snavio.command.failed","type":"Notification","message":"x","topicarn":"y"}`
	attrs := map[string]MessageAttribute{attrSeq: {"Number", "1"}, attrTenant: {"String", "acme"}, attrEvent: {"String", "snavio.command.failed"}}
	r, err := DecodeTelemetryMessage(TelemetryMessage{Body: ev, Attributes: attrs}, "arn:aws:sns:us-east-1:000000000000:t", "acme")
	if err != nil || string(r.Event) != ev {
		t.Fatalf("%+v %v", r, err)
	}
}
