package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/platform/fnurltest"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

const (
	replaySrc    = "demo/app"
	replayTarget = "mailer"
)

var replaySecret = bytes.Repeat([]byte("k"), 32)

// replayFixture is an environment on the emulators: the registry and flow
// tables on DynamoDB Local, the DLQ, the bus and a queue that receives
// every command put on the bus on kumo.
type replayFixture struct {
	t      *testing.T
	r      *awsReplay
	reg    *awsstore.RegistryStore
	fn     *fnurltest.Server // the control API's Function URL
	clk    *clock.Fake
	sqs    *sqs.Client
	dlqURL string
	bus    *recordingBus // what the bus accepted
	master *provenance.Signer
	calls  *awstest.Calls
}

func newReplayFixture(t *testing.T) *replayFixture {
	t.Helper()
	ctx := context.Background()
	d := emu.DynamoDB(t)
	k := emu.Kumo()
	env := emu.UniqueName()
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Millisecond))
	calls := &awstest.Calls{}
	sc := awsstore.Config{Env: env, AWSConfig: d.Config(), ClientOptions: append(d.ClientOptions(), calls.DynamoDB), Clock: clk}
	flow, err := awsstore.NewFlowStore(sc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := awsstore.NewRegistryStore(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(flow.CreateTables(ctx), reg.CreateTables(ctx)); err != nil {
		t.Fatal(err)
	}
	audits, err := awsstore.NewReplayAudits(sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	sq := sqs.NewFromConfig(k.Config(), append(k.SQSOptions(), calls.SQS)...)
	eb := eventbridge.NewFromConfig(k.Config(), func(o *eventbridge.Options) {
		o.BaseEndpoint = awssdk.String(k.Endpoint)
		o.APIOptions = append(o.APIOptions, calls.Count)
	})
	names := stack.Names{Env: env}
	mkQueue := func(name string) (string, string) {
		q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return awssdk.ToString(q.QueueUrl), a.Attributes["QueueArn"]
	}
	_, queueARN := mkQueue(names.Queue("mailer"))
	dlqURL, dlqARN := mkQueue(names.Queue("mailer-dlq"))
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: awssdk.String(names.Bus())}); err != nil {
		t.Fatal(err)
	}
	by := registry.Actor{Who: "test", At: clk.Now()}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: replaySrc, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: replaySecret, ActivatedAt: clk.Now().Add(-time.Hour)}}}},
		{Route: &registry.Route{Target: replayTarget, Command: "send", QueueARN: queueARN, DLQARN: dlqARN}},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	master, err := provenance.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	// The control API as the control function serves it to the operator:
	// the registry, delivery keys and the replayer over DynamoDB Local,
	// behind a fake Function URL that checks SigV4.
	fn, err := fnurltest.New(fnurltest.Options{Env: env, Clock: clk, API: func(auth controlapi.Authenticator) (http.Handler, error) {
		leftOut := map[controlapi.Resource]controlapi.Absence{}
		for _, r := range controlapi.Resources {
			if r != controlapi.ResourceRegistry && r != controlapi.ResourceDelivery && r != controlapi.ResourceReplayer {
				leftOut[r] = controlapi.Absence{Code: fnurltest.NotServedCode, Why: string(r) + " is not served here", Instead: "the test serves what a replay needs"}
			}
		}
		return controlapi.New(controlapi.Config{Auth: auth, Clock: clk,
			Registry: controlapi.RegistryOptions{Registry: reg},
			Delivery: controlapi.DeliveryOptions{Signer: master, Registry: reg},
			Replayer: controlapi.ReplayerOptions{Audits: audits, Registry: reg, Delivery: master},
			LeftOut:  leftOut})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Close)
	fn.AddKey(opKey, opSecret, opToken, "arn:aws:sts::"+fnurltest.Account+":assumed-role/"+names.OperatorRole()+"/cli")
	c := NewAWS(Target{Kind: "aws", Profile: "prod", Region: fn.Region, Env: env, ControlURL: fn.URL},
		AWSOptions{HTTPClient: fn.Client(), Clock: clk, LoadOptions: []func(*awsconfig.LoadOptions) error{staticCreds(opKey, opSecret, opToken)}})
	api, err := c.api("replay")
	if err != nil {
		t.Fatal(err)
	}
	// The sink is the env's bus with the operator's client, as the CLI
	// builds it.
	dir := t.TempDir()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "snavioTest", "AWS_SECRET_ACCESS_KEY": "snavioTest", "AWS_REGION": "us-east-1",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"), "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	bus := &recordingBus{inner: busAdapter{operatorBus(Target{Kind: "aws", Endpoint: k.Endpoint, BusName: names.Bus()}, eb)}}
	r := &awsReplay{
		names: names, bus: names.Bus(), control: newControlReplayer(api), sqs: sq, events: eb, put: bus,
		routes:   func(ctx context.Context) (*replay.RouteView, error) { return routeView(ctx, api) },
		keys:     controlDeliveryKeys{c},
		operator: func(context.Context) (string, error) { return "arn:aws:iam::000000000000:user/operator", nil },
		clk:      clk,
		sleep:    func(_ context.Context, d time.Duration) error { clk.Advance(d); return nil },
		lease:    time.Second, wait: -1,
	}
	return &replayFixture{t: t, r: r, reg: reg, fn: fn, clk: clk, sqs: sq, dlqURL: dlqURL, bus: bus, master: master, calls: calls}
}

// recordingBus keeps the commands kumo's PutEvents accepted (kumo's own
// rule targets deliver to a fixed address, not the test's server).
type recordingBus struct {
	inner replay.Bus
	got   []envelope.Envelope
	// refuse answers every entry with this error code instead of putting
	// it (a throttled or refused entry).
	refuse string
}

func (b *recordingBus) PutEvents(ctx context.Context, evs []replay.Event) ([]replay.Result, error) {
	if b.refuse != "" {
		res := make([]replay.Result, len(evs))
		for i := range res {
			res[i] = replay.Result{ErrorCode: b.refuse, ErrorMessage: "refused by the test"}
		}
		return res, nil
	}
	res, err := b.inner.PutEvents(ctx, evs)
	for i := range res {
		if res[i].EventID != "" {
			var e envelope.Envelope
			if err := json.Unmarshal(evs[i].Detail, &e); err != nil {
				return nil, err
			}
			b.got = append(b.got, e)
		}
	}
	return res, err
}

// take returns what the bus accepted since the last take.
func (b *recordingBus) take() []envelope.Envelope {
	out := b.got
	b.got = nil
	return out
}

// deadLetter puts command n into the DLQ as the dispatcher delivered it,
// delivery-signed by sign (nil: unsigned, a planted message).
func (f *replayFixture) deadLetter(n int, sign *provenance.Signer) string {
	f.t.Helper()
	id := fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n)
	e := envelope.New(id, f.clk.Now().Add(-time.Minute), replayTarget, "send", []byte(`{"n":`+strconv.Itoa(n)+`}`))
	e.Metadata.VersionID = "hmac-v1"
	k, _ := signing.NewKey("hmac-v1", replaySecret)
	if err := k.SignEnvelope(&e, replaySrc); err != nil {
		f.t.Fatal(err)
	}
	e.Command.Source = replaySrc
	body, err := e.AppendJSON(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	m := provenance.Message{CommandID: id, Source: replaySrc, Target: replayTarget, Command: "send", Body: body}
	if sign != nil {
		if err := sign.Sign(&m); err != nil {
			f.t.Fatal(err)
		}
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range m.Attributes() {
		if v != "" {
			attrs[k] = sqstypes.MessageAttributeValue{DataType: awssdk.String("String"), StringValue: awssdk.String(v)}
		}
	}
	if _, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: awssdk.String(f.dlqURL), MessageBody: awssdk.String(string(body)), MessageAttributes: attrs}); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// drain returns the commands in q (all its messages, deleted).
func (f *replayFixture) drain(q string) []envelope.Envelope {
	f.t.Helper()
	var out []envelope.Envelope
	for {
		got, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: awssdk.String(q), MaxNumberOfMessages: 10})
		if err != nil {
			f.t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		for _, m := range got.Messages {
			var e envelope.Envelope
			if err := json.Unmarshal([]byte(awssdk.ToString(m.Body)), &e); err != nil {
				f.t.Fatalf("%s: %v", awssdk.ToString(m.Body), err)
			}
			out = append(out, e)
			if _, err := f.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: awssdk.String(q), ReceiptHandle: m.ReceiptHandle}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// follow reads a stream to its end and returns the finished update.
func (f *replayFixture) follow(st ReplayStream, err error) wire.ReplayUpdate {
	t := f.t
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var last wire.ReplayUpdate
	for {
		u, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = u
	}
	if last.Event != wire.ReplayEventFinished {
		t.Fatalf("the stream ended with %q, want finished", last.Event)
	}
	return last
}

// TestAWSDLQReplay: a DLQ replay on SQS, the bus on kumo and the
// registry and audits on DynamoDB Local. A signed dead-lettered message
// is replayed (re-signed with the source's current key, re-timestamped,
// with replay metadata, accepted by the shield) and deleted; a planted one
// is refused and left; a plan leaves the queue as it was.
func TestAWSDLQReplay(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	genuine := f.deadLetter(1, f.master)
	other, _ := provenance.NewSigner(bytes.Repeat([]byte{9}, 32))
	f.deadLetter(2, nil)   // unsigned
	f.deadLetter(3, other) // signed by another platform
	req := wire.ReplayRequest{From: "dlq:" + f.r.names.Queue("mailer-dlq"), Reason: "incident 7"}

	pr, err := f.r.plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Plan.Total != 1 || pr.Plan.Refused != 2 || pr.Plan.RefusedBy[provenance.ReasonUnsigned] != 1 || pr.Plan.RefusedBy[provenance.ReasonUnknownKey] != 1 {
		t.Fatalf("plan = %+v, want 1 to send, 1 unsigned and 1 unknown_delivery_key refused", pr.Plan)
	}

	f.calls.Take()
	fin := f.follow(f.r.start(ctx, req))
	t.Logf("AWS calls of `replay --from dlq:` (plan and run, 3 messages, 1 sent): %v", f.calls.Take().Ops())
	a := fin.Replay
	if a.Status != wire.ReplayDone || a.SentCount != 1 || a.Refused != 2 || a.Planned != 1 || fin.Error != "" {
		t.Fatalf("finished = %+v (%s), want done, 1 sent, 2 refused", a, fin.Error)
	}
	if a.Operator != "arn:aws:iam::000000000000:user/operator" || a.Origin != req.From {
		t.Errorf("audit operator %q origin %q", a.Operator, a.Origin)
	}

	// What the bus got: the genuine command, replayed and valid now.
	got := f.bus.take()
	if len(got) != 1 || got[0].Metadata.ID != genuine {
		t.Fatalf("the bus got %d command(s), want %s once", len(got), genuine)
	}
	e := got[0]
	if !e.Metadata.Replay || e.Metadata.ReplayID != a.ID || e.Metadata.ReplayReason != "incident 7" || e.Metadata.Timestamp != envelope.FormatTimestamp(f.clk.Now()) {
		t.Errorf("replayed metadata = %+v", e.Metadata)
	}
	detail, _ := e.AppendJSON(nil)
	view, err := replay.LoadRegistry(ctx, f.reg, keys.Policy{}, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := replay.NewVerifier(view, shield.Config{}, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Refusal(&replay.Archived{Source: replaySrc, DetailType: envelope.EventType, Detail: detail, ReceivedAt: f.clk.Now()}); r != "" {
		t.Errorf("the shield refuses the replayed command: %s", r)
	}

	// The DLQ kept the two planted messages only.
	left := f.drain(f.dlqURL)
	if len(left) != 2 {
		t.Fatalf("the DLQ holds %d message(s), want the 2 refused", len(left))
	}
	for _, e := range left {
		if e.Metadata.ID == genuine {
			t.Error("the replayed message was not deleted")
		}
	}

	// The audit is in DynamoDB: show and list answer it.
	shown, err := f.r.control.Get(ctx, a.ID)
	if err != nil || shown.Status != wire.ReplayDone || len(shown.Sent) != 1 || shown.Sent[0] != genuine {
		t.Errorf("audit = %+v, %v", shown, err)
	}
}

// TestAWSDLQReplayResumes: a run paused by --limit, then a crash between
// the audit write and the delete (the sent message is back in the DLQ):
// the resume sends each command once and deletes the copy it finds sent.
func TestAWSDLQReplayResumes(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	ids := []string{f.deadLetter(1, f.master), f.deadLetter(2, f.master), f.deadLetter(3, f.master)}
	req := wire.ReplayRequest{From: "dlq:" + f.r.names.Queue("mailer-dlq"), Reason: "incident 8", Limit: 1}
	fin := f.follow(f.r.start(ctx, req))
	if fin.Replay.Status != wire.ReplayPaused || fin.Replay.SentCount != 1 {
		t.Fatalf("first run = %s with %d sent, want paused after 1", fin.Replay.Status, fin.Replay.SentCount)
	}
	first := f.bus.take()
	if len(first) != 1 {
		t.Fatalf("the bus got %d, want 1", len(first))
	}
	// The crash: the message of the command sent is back in the DLQ.
	var n int
	fmt.Sscanf(first[0].Metadata.ID[len(first[0].Metadata.ID)-12:], "%d", &n)
	f.deadLetter(n, f.master)

	// Another replayer cannot take it while this one holds it... once
	// paused, the claim is released and a resume runs.
	fin = f.follow(f.r.resume(ctx, fin.Replay.ID, wire.ReplayResumeRequest{}))
	if fin.Replay.Status != wire.ReplayDone || fin.Replay.SentCount != 3 || fin.Replay.Resumes != 1 {
		t.Fatalf("resumed run = %+v (%s), want done with 3 sent", fin.Replay, fin.Error)
	}
	rest := f.bus.take()
	seen := map[string]int{first[0].Metadata.ID: 1}
	for _, e := range rest {
		seen[e.Metadata.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("command %s was put on the bus %d times, want once", id, seen[id])
		}
	}
	if left := f.drain(f.dlqURL); len(left) != 0 {
		t.Errorf("the DLQ still holds %d message(s), want none (the copy of a sent command is deleted)", len(left))
	}
	if _, err := f.r.resume(ctx, fin.Replay.ID, wire.ReplayResumeRequest{}); !isStatus(err, http.StatusConflict) {
		t.Errorf("resuming a finished replay = %v, want 409", err)
	}
}

// TestAWSReplayRefusesBadInput: the local API's answers, same statuses.
func TestAWSReplayRefusesBadInput(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	for name, req := range map[string]wire.ReplayRequest{
		"no reason":          {From: "dlq:x"},
		"bad origin":         {From: "s3:x", Reason: "r"},
		"archive no start":   {From: "archive", Reason: "r"},
		"archive with cause": {From: "archive", Reason: "r", Start: f.clk.Now().Add(-time.Hour), FailureReason: "max_receives"},
		"bad dedupe":         {From: "dlq:x", Reason: "r", Dedupe: "maybe"},
	} {
		if _, err := f.r.plan(ctx, req); !isStatus(err, http.StatusBadRequest) {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	if _, err := f.r.plan(ctx, wire.ReplayRequest{From: "dlq:nope", Reason: "r"}); !isStatus(err, http.StatusNotFound) {
		t.Errorf("unknown queue: %v, want 404", err)
	}
	if _, err := f.r.resume(ctx, "0f8fad5b-d9cb-469f-a165-70867728950e", wire.ReplayResumeRequest{}); !isStatus(err, http.StatusNotFound) {
		t.Errorf("unknown replay: %v, want 404", err)
	}
	var na *NotAvailableError
	if _, err := (&AWS{target: Target{Kind: "aws", Env: "prod"}}).ListReplays(ctx); !errors.As(err, &na) || !strings.Contains(err.Error(), "control_url") {
		t.Errorf("a profile without control_url: %v, want it named", err)
	}
	if _, err := (&AWS{target: Target{Kind: "aws", ControlURL: f.fn.URL}}).StartReplay(ctx, wire.ReplayRequest{From: "archive"}); !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "no env") {
		t.Errorf("a profile without env: %v, want 400", err)
	}
}

func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// TestAWSDLQReplayCalls measures the AWS calls and control API requests
// of a DLQ replay of 20 commands (plan and run): per batch of 10, one
// ReceiveMessage, one PutEvents, one signing request and two audit
// writes; one DeleteMessage per command. DynamoDB is the control
// function's alone.
func TestAWSDLQReplayCalls(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	for i := 1; i <= 20; i++ {
		f.deadLetter(i, f.master)
	}
	f.calls.Take()
	f.fn.Requests()
	fin := f.follow(f.r.start(ctx, wire.ReplayRequest{From: "dlq:" + f.r.names.Queue("mailer-dlq"), Reason: "load"}))
	got := f.calls.Take().Ops()
	requests := map[string]int{}
	for _, r := range f.fn.Requests() {
		p := r.Path
		if strings.HasPrefix(p, "/v1/replayer/audits/") {
			p = "/v1/replayer/audits/{id}"
		} else if strings.HasPrefix(p, "/v1/delivery-keys/") {
			p = "/v1/delivery-keys/{target}"
		}
		requests[r.Method+" "+p]++
	}
	puts := len(f.bus.take())
	t.Logf("AWS calls of `replay --from dlq:` for 20 commands (plan and run; DynamoDB's are the control function's): %v, PutEvents entries %d; control API requests %v", got, puts, requests)
	if fin.Replay.SentCount != 20 || puts != 20 {
		t.Fatalf("sent %d (bus %d), want 20", fin.Replay.SentCount, puts)
	}
	if got["DeleteMessage"] != 20 || got["PutEvents"] != 2 || got["TransactWriteItems"] > 2*4+1 || got["PutItem"] != 1 {
		t.Errorf("calls %v: want 20 DeleteMessage, 2 PutEvents, at most 9 TransactWriteItems (2 per batch of the run), 1 PutItem", got)
	}
	if requests["POST /v1/replayer/sign"] != 2 || requests["POST /v1/replayer/audits"] != 1 || requests["PUT /v1/replayer/audits/{id}"] > 2*4+1 {
		t.Errorf("control API requests %v: want 2 signing requests, 1 audit created, at most 9 audit writes", requests)
	}
}

// TestAWSDLQReplayInterrupted: Ctrl-C in the middle of a run (here, while
// it paces itself at --rate 1/s): the run records itself interrupted
// after what it sent, makes the message in hand visible again, and the
// resume sends the rest, each command once.
func TestAWSDLQReplayInterrupted(t *testing.T) {
	f := newReplayFixture(t)
	ids := []string{f.deadLetter(1, f.master), f.deadLetter(2, f.master), f.deadLetter(3, f.master)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := false
	f.r.sleep = func(ctx context.Context, d time.Duration) error {
		if !interrupted {
			interrupted = true
			cancel() // the operator's Ctrl-C
			return ctx.Err()
		}
		f.clk.Advance(d)
		return nil
	}
	fin := f.follow(f.r.start(ctx, wire.ReplayRequest{From: "dlq:" + f.r.names.Queue("mailer-dlq"), Reason: "incident 10", Rate: 1}))
	a := fin.Replay
	if a.Status != wire.ReplayInterrupted || a.SentCount != 1 || !strings.Contains(fin.Error, "--resume "+a.ID) {
		t.Fatalf("interrupted run = %s with %d sent (%s), want interrupted after 1", a.Status, a.SentCount, fin.Error)
	}
	stored, err := f.r.control.Get(context.Background(), a.ID)
	if err != nil || stored.Status != wire.ReplayInterrupted || len(stored.Sent) != 1 {
		t.Fatalf("stored audit = %+v, %v", stored, err)
	}
	fin = f.follow(f.r.resume(context.Background(), a.ID, wire.ReplayResumeRequest{}))
	if fin.Replay.Status != wire.ReplayDone || fin.Replay.SentCount != 3 {
		t.Fatalf("resumed run = %+v (%s), want done with 3 sent", fin.Replay, fin.Error)
	}
	seen := map[string]int{}
	for _, e := range f.bus.take() {
		seen[e.Metadata.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("command %s was put on the bus %d times, want once", id, seen[id])
		}
	}
	if left := f.drain(f.dlqURL); len(left) != 0 {
		t.Errorf("the DLQ still holds %d message(s)", len(left))
	}
}

// TestAWSDLQReplayKeepsRefusedEntries: an entry PutEvents refuses is
// counted failed and its message stays in the DLQ.
func TestAWSDLQReplayKeepsRefusedEntries(t *testing.T) {
	f := newReplayFixture(t)
	id := f.deadLetter(1, f.master)
	f.bus.refuse = "ThrottlingException"
	fin := f.follow(f.r.start(context.Background(), wire.ReplayRequest{From: "dlq:" + f.r.names.Queue("mailer-dlq"), Reason: "incident 11"}))
	if a := fin.Replay; a.Status != wire.ReplayDone || a.SentCount != 0 || a.Failed != 1 || !strings.Contains(a.LastError, "ThrottlingException") {
		t.Fatalf("run = %+v, want done with 1 failed and nothing sent", a)
	}
	if left := f.drain(f.dlqURL); len(left) != 1 || left[0].Metadata.ID != id {
		t.Fatalf("the DLQ holds %d message(s), want the refused one", len(left))
	}
}

// TestAWSReplaySignRefuses: the control function re-signs only genuine
// commands of a replay the caller holds: a forged archived command and
// an unsigned DLQ message are refused by reason, a replayer without the
// claim and a finished replay get 409, and the genuine command comes back
// signed with the source's current key.
func TestAWSReplaySignRefuses(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	command := func(n int, secret []byte) []byte {
		e := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), f.clk.Now().Add(-time.Minute), replayTarget, "send", []byte(`{}`))
		e.Metadata.VersionID = "hmac-v1"
		k, _ := signing.NewKey("hmac-v1", secret)
		if err := k.SignEnvelope(&e, replaySrc); err != nil {
			t.Fatal(err)
		}
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := wire.ReplayAudit{ID: "7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3a", Origin: wire.ReplayOriginArchive, Reason: "incident 12", Dedupe: wire.DedupeKeepID,
		DedupeTTLSeconds: 300, Status: wire.ReplayRunning, StartedAt: f.clk.Now()}
	if err := f.r.control.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	recs := []replay.Record{
		{Source: replaySrc, Detail: command(1, replaySecret), At: f.clk.Now()},
		{Source: replaySrc, Detail: command(2, bytes.Repeat([]byte("f"), 32)), At: f.clk.Now()}, // forged
	}
	got, err := f.r.control.signer("").Sign(ctx, &a, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Refusal != "" || got[1].Refusal != "bad_signature" {
		t.Fatalf("signed = %+v, want the genuine one signed and the forged one refused bad_signature", got)
	}
	var e envelope.Envelope
	if err := json.Unmarshal(got[0].Event.Detail, &e); err != nil || !e.Metadata.Replay || e.Metadata.ReplayID != a.ID || got[0].Event.Source != replaySrc {
		t.Errorf("re-signed entry %s (%v)", got[0].Event.Detail, err)
	}

	// A DLQ message without its delivery signature, for a DLQ replay (the
	// audit's origin says which check applies, not the request).
	d := a
	d.ID, d.Origin = "7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3b", "dlq:"+f.r.names.Queue("mailer-dlq")
	if err := f.r.control.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	dlq := f.r.control.signer("arn:aws:sqs:us-east-1:000000000000:" + f.r.names.Queue("mailer-dlq"))
	got, err = dlq.Sign(ctx, &d, []replay.Record{{Source: replaySrc, Detail: command(3, replaySecret), At: f.clk.Now()}})
	if err != nil || len(got) != 1 || got[0].Refusal != provenance.ReasonUnsigned {
		t.Errorf("an unsigned DLQ message: %+v, %v; want refused %s", got, err, provenance.ReasonUnsigned)
	}

	// Another replayer, and a replay that ended.
	other := newControlReplayer(f.r.control.api)
	if _, err := other.signer("").Sign(ctx, &a, recs[:1]); !isStatus(err, http.StatusConflict) {
		t.Errorf("signing without the claim: %v, want 409", err)
	}
	a.Status, a.EndedAt = wire.ReplayDone, f.clk.Now()
	if err := f.r.control.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.control.signer("").Sign(ctx, &a, recs[:1]); !isStatus(err, http.StatusConflict) {
		t.Errorf("signing for a finished replay: %v, want 409", err)
	}
}
