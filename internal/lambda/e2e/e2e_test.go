// Package e2e runs the whole AWS path on this machine: PutEvents on
// kumo's EventBridge, its rule, the real bootstrap binary behind kumo's
// Lambda Runtime API, SQS target queues on kumo, strict dedupe and
// counters on DynamoDB Local, and the outbox's stream through the outbox
// drain and SNS to each tenant's telemetry queue. docs/lambda.md ("End to
// end") says which hops kumo cannot run and what stands in for them.
package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/internal/lambda"
	"github.com/snavio/snavio/internal/lambda/awsworld"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/internal/syncbuf"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var emu awstest.Emulators

// listenerFD is the descriptor of the listener the parent passes on.
const listenerFD = 3

// kumoURL is kumo's endpoint on the inherited listener (the child only).
var kumoURL string

// TestMain: kumo's EventBridge reads KUMO_HOST and KUMO_PORT at package
// init to find its own Lambda endpoint, so the tests run in a child
// process started with them set, serving kumo on a listener the parent
// opened (so no other process can take the port in between).
func TestMain(m *testing.M) {
	if os.Getenv("KUMO_PORT") == "" {
		os.Exit(reexec())
	}
	defer emu.Close()
	ln, err := net.FileListener(os.NewFile(listenerFD, "kumo-listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the inherited listener:", err)
		return
	}
	// kumo serves in-process on its own random port; the inherited
	// listener forwards to it (its state is shared by the whole process).
	target, _ := url.Parse(emu.Kumo().Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	// A bootstrap killed at the end leaves its long poll cancelled: not
	// an error of the test.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "e2e: kumo proxy:", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	// kumo's EventBridge logs every delivery at Info on the default logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	kumoURL = "http://" + ln.Addr().String()
	m.Run()
}

// reexec runs this test binary again with KUMO_HOST and KUMO_PORT set
// and returns its exit code.
func reexec() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "KUMO_HOST=127.0.0.1", "KUMO_PORT="+port)
	cmd.ExtraFiles = []*os.File{f} // descriptor 3 in the child
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "e2e: running the tests with kumo's port:", err)
		return 1
	}
}

const (
	account = "000000000000"
	source  = "acme/billing"
)

var (
	secret      = []byte("0123456789abcdef0123456789abcdef")
	deliveryKey = bytes.Repeat([]byte{7}, provenance.MinMasterLen)
)

// world is everything the test set up.
type world struct {
	env        string
	sqs        *sqs.Client
	lambda     *awslambda.Client
	eb         *eventbridge.Client
	escURL     string
	plainURL   string
	strictURL  string
	telemetry  map[string]string // tenant -> its telemetry queue
	key        *signing.Key
	slowFn     string
	drain      *lambda.OutboxDrain
	poll       *awstest.StreamPoller
	bootstraps []*exec.Cmd
	logs       []*syncbuf.Buffer
	// stdout is each function's standard output: its EMF lines.
	stdout map[string]*syncbuf.Buffer
}

func queue(t *testing.T, c *sqs.Client, name string) (arn, url string) {
	t.Helper()
	ctx := context.Background()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], aws.ToString(out.QueueUrl)
}

// setUp makes the tables, queues, topics, rule and functions, and starts
// the ingest and slow bootstraps.
func setUp(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	d := emu.DynamoDB(t)
	k := emu.Kumo()
	cfg := k.Config()
	w := &world{env: emu.UniqueName(), telemetry: map[string]string{}, stdout: map[string]*syncbuf.Buffer{}}
	w.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	w.lambda = awslambda.NewFromConfig(cfg, func(o *awslambda.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	w.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	rawSNS := sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(kumoURL) })

	// The registry, flow and outbox tables on DynamoDB Local.
	store := awsstore.Config{Env: w.env, AWSConfig: d.Config(), ClientOptions: d.ClientOptions(), AccountID: account,
		SNSOptions: []func(*sns.Options){func(o *sns.Options) { o.BaseEndpoint = aws.String(kumoURL) }}}
	reg, err := awsstore.NewRegistryStore(store)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := awsstore.NewFlowStore(store)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := awsstore.NewOutboxStore(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, create := range []func(context.Context) error{reg.CreateTables, fs.CreateTables, ob.CreateTables} {
		if err := create(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Target queues, the escalation queue and its DLQ on kumo.
	plainARN, plainURL := queue(t, w.sqs, w.env+"-mailer")
	strictARN, strictURL := queue(t, w.sqs, w.env+"-ledger")
	dlqARN, _ := queue(t, w.sqs, w.env+"-dlq")
	_, w.escURL = queue(t, w.sqs, w.env+"-escalations")
	w.plainURL, w.strictURL = plainURL, strictURL
	now := time.Now().UTC()
	plain := dispatchtest.RegistryRoute("mailer", "send")
	plain.QueueARN, plain.DLQARN = plainARN, dlqARN
	strict := dispatchtest.RegistryRoute("ledger", "post")
	strict.QueueARN, strict.DLQARN, strict.DedupeMode = strictARN, dlqARN, registry.DedupeStrict
	aclPlain := dispatchtest.RegistryACL(source, "mailer", "send")
	aclStrict := dispatchtest.RegistryACL(source, "ledger", "post")
	// Moderate, not critical: a critical ACL is cached for 2 s (4 s
	// stale), less than this set-up takes under -race, and an expired ACL
	// sends every command to the slow stage (acl_expired), which would
	// leave the fast path untested.
	aclPlain.Profile, aclStrict.Profile = registry.ProfileModerate, registry.ProfileModerate
	by := registry.Actor{Who: "e2e", At: now}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: source, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: now.Add(-time.Hour)}}}},
		{Route: &plain}, {Route: &strict}, {ACL: &aclPlain}, {ACL: &aclStrict},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	if w.key, err = signing.NewKey("hmac-v1", secret); err != nil {
		t.Fatal(err)
	}

	// Each tenant's telemetry topic on kumo's SNS, with its queue
	// subscribed (as tenant on-boarding makes them).
	pub, err := awsstore.NewSNSPublisher(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", telemetry.PlatformTenant} {
		arn, err := pub.TopicARN(tenant)
		if err != nil {
			t.Fatal(err)
		}
		topic, err := rawSNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(arn[strings.LastIndexByte(arn, ':')+1:])})
		if err != nil {
			t.Fatal(err)
		}
		_, w.telemetry[tenant] = queue(t, w.sqs, w.env+"-telemetry-"+strings.TrimPrefix(tenant, "_"))
		if _, err := rawSNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(w.telemetry[tenant])}); err != nil {
			t.Fatal(err)
		}
	}
	// The outbox drain, run by this test on the stream (kumo has no stream
	// event source), on kumo's SNS (whose missing PublishBatch the
	// adapter stands in for).
	w.drain = lambda.NewOutboxDrain(pub.WithBatch(&awstest.KumoPublishBatch{SNS: rawSNS}), ob, lambda.OutboxConfig{})
	store.SetDefaults()
	if w.poll, err = awstest.NewStreamPoller(ctx, d, store.OutboxTable()); err != nil {
		t.Fatal(err)
	}

	// The bootstrap, built as make lambda builds it, run once per function.
	var boot awsworld.Bootstrap
	t.Cleanup(boot.Close)
	bin, err := boot.Path()
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := awsworld.ZipBootstrap(bin)
	if err != nil {
		t.Fatal(err)
	}
	ingestFn, slowFn := w.env+"-ingest", w.env+"-slow"
	w.slowFn = slowFn
	for _, fn := range []struct{ name, function string }{{ingestFn, lambda.FunctionIngest}, {slowFn, lambda.FunctionSlow}} {
		if _, err := w.lambda.CreateFunction(ctx, &awslambda.CreateFunctionInput{
			FunctionName: aws.String(fn.name), Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
			Role: aws.String("arn:aws:iam::" + account + ":role/snavio-" + fn.function), Timeout: aws.Int32(30),
			Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureX8664}, Code: &lambdatypes.FunctionCode{ZipFile: zipped},
		}); err != nil {
			t.Fatal(err)
		}
		w.start(t, bin, fn.name, fn.function, d.Endpoint)
	}
	t.Cleanup(w.stop)
	// Ready once each function answers a synchronous invoke (kumo routes
	// to a Runtime API handler only after its first poll).
	w.invoke(t, ingestFn, events.CloudWatchEvent{DetailType: "snavio.e2e-ping", Source: "e2e", Detail: json.RawMessage(`{}`)})
	w.invoke(t, slowFn, events.SQSEvent{})

	// The rule: commands on the default bus to the ingest function.
	pattern, _ := json.Marshal(map[string][]string{"detail-type": {envelope.EventType}})
	if _, err := w.eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(w.env + "-commands"), EventPattern: aws.String(string(pattern)), State: ebtypes.RuleStateEnabled}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(w.env + "-commands"), Targets: []ebtypes.Target{
		{Id: aws.String("ingest"), Arn: aws.String("arn:aws:lambda:us-east-1:" + account + ":function:" + ingestFn)},
	}}); err != nil {
		t.Fatal(err)
	}
	return w
}

// start runs the bootstrap for one function against kumo's Runtime API,
// configured by the environment alone, as Lambda would.
func (w *world) start(t *testing.T, bin, name, function, ddb string) {
	t.Helper()
	cmd := exec.Command(bin)
	logs, stdout := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(stdout, logs), logs
	w.stdout[function] = stdout
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(kumoURL, "http://") + "/_runtime/" + name,
		lambda.EnvFunction + "=" + function, lambda.EnvEnv + "=" + w.env, lambda.EnvEscalationQueue + "=" + w.escURL,
		lambda.EnvDeliveryKey + "=" + base64.StdEncoding.EncodeToString(deliveryKey),
		"AWS_LAMBDA_LOG_STREAM_NAME=" + name, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=snavioTest", "AWS_SECRET_ACCESS_KEY=snavioTest",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL_DYNAMODB=" + ddb, "AWS_ENDPOINT_URL_SQS=" + kumoURL, "HOME=" + t.TempDir(),
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.bootstraps = append(w.bootstraps, cmd)
	w.logs = append(w.logs, logs)
}

// stop ends the bootstraps; once it returns, their output is whole.
func (w *world) stop() {
	for _, c := range w.bootstraps {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	w.bootstraps = nil
}

// output is every bootstrap's log, for a failure message.
func (w *world) output() string {
	var b strings.Builder
	for i, l := range w.logs {
		fmt.Fprintf(&b, "--- bootstrap %d:\n%s\n", i, l.String())
	}
	return b.String()
}

// invoke calls fn synchronously with payload, retrying until kumo has a
// handler for it, and returns the answer.
func (w *world) invoke(t *testing.T, fn string, payload any) []byte {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := w.lambda.Invoke(context.Background(), &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: b})
		if err == nil && out.FunctionError == nil {
			return out.Payload
		}
		if err == nil {
			t.Fatalf("%s failed: %s: %s\n%s", fn, aws.ToString(out.FunctionError), out.Payload, w.output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60 s: %v\n%s", fn, err, w.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// command is a signed command of source to target/name.
func (w *world) command(t *testing.T, id, target, name string) string {
	t.Helper()
	env := envelope.New(id, time.Now().UTC(), target, name, []byte(`{"n":1}`))
	if err := w.key.SignEnvelope(&env, source); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *world) putEvents(t *testing.T, details ...string) {
	t.Helper()
	in := &eventbridge.PutEventsInput{}
	for _, d := range details {
		in.Entries = append(in.Entries, ebtypes.PutEventsRequestEntry{Source: aws.String(source), DetailType: aws.String(envelope.EventType), Detail: aws.String(d)})
	}
	out, err := w.eb.PutEvents(context.Background(), in)
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("PutEvents: %v %+v", err, out)
	}
}

// slowOnce stands in for the escalation queue's event source mapping
// (kumo has no SQS poller): it receives a batch, invokes the slow
// function with it through kumo's Runtime API, and deletes the records
// the answer does not report failed. It returns how many it passed.
func (w *world) slowOnce(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	got, err := w.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.escURL), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) == 0 {
		return 0
	}
	var ev events.SQSEvent
	for _, m := range got.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", AWSRegion: "us-east-1"})
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(w.invoke(t, w.slowFn, ev), &resp); err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range got.Messages {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		if _, err := w.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(w.escURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return len(got.Messages)
}

// drainOutbox stands in for the outbox stream's event source mapping:
// the stream's new records, as Lambda passes them, to the outbox
// function's handler.
func (w *world) drainOutbox(t *testing.T) {
	t.Helper()
	ev, err := w.poll.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) == 0 {
		return
	}
	resp, err := w.drain.Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("outbox drain: %v %+v", err, resp)
	}
}

func (w *world) receive(t *testing.T, url string) []sqstypes.Message {
	t.Helper()
	var out []sqstypes.Message
	for {
		got, err := w.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		out = append(out, got.Messages...)
	}
}

// telemetryEvent is one event as a tenant's telemetry queue holds it.
type telemetryEvent struct {
	Name      string
	CommandID string
}

func (w *world) readTelemetry(t *testing.T, tenant string) []telemetryEvent {
	t.Helper()
	var out []telemetryEvent
	for _, m := range w.receive(t, w.telemetry[tenant]) {
		var n struct{ Type, Message string }
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &n); err != nil || n.Type != "Notification" {
			t.Fatalf("not an SNS notification: %s", aws.ToString(m.Body))
		}
		var e struct {
			Event     string `json:"event"`
			CommandID string `json:"command_id"`
		}
		if err := json.Unmarshal([]byte(n.Message), &e); err != nil {
			t.Fatalf("not an event: %s", n.Message)
		}
		out = append(out, telemetryEvent{Name: e.Event, CommandID: e.CommandID})
	}
	return out
}

// eventually runs step until done says so, within 60 s.
func eventually(t *testing.T, w *world, what string, step func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !step() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s\n%s", what, w.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bootstrap binary")
	}
	began := time.Now()
	w := setUp(t)
	t.Logf("set-up (tables, queues, topics, functions, bootstrap build and start): %v", time.Since(began).Round(time.Millisecond))

	// A signed command: delivered once, with command.source set by the
	// dispatcher from the bus's source.
	const plainID = "0f8fad5b-d9cb-469f-a165-00000000e201"
	began = time.Now()
	w.putEvents(t, w.command(t, plainID, "mailer", "send"))
	var plain []sqstypes.Message
	eventually(t, w, "the signed command in the mailer queue", func() bool {
		// The fast stage may hand a command to the slow one (a cold
		// environment's first command, a failed delivery): the escalation
		// queue's mapping runs throughout, as on AWS.
		w.slowOnce(t)
		plain = append(plain, w.receive(t, w.plainURL)...)
		return len(plain) > 0
	})
	t.Logf("PutEvents to delivered (EventBridge rule, kumo's async invoke, the bootstrap): %v", time.Since(began).Round(time.Millisecond))

	// An invalid command (its detail changed after signing).
	const invalidID = "0f8fad5b-d9cb-469f-a165-00000000e202"
	bad := strings.Replace(w.command(t, invalidID, "mailer", "send"), `"n":1`, `"n":2`, 1)
	w.putEvents(t, bad)

	// A strict command, then the same command again.
	const strictID = "0f8fad5b-d9cb-469f-a165-00000000e203"
	strictCmd := w.command(t, strictID, "ledger", "post")
	w.putEvents(t, strictCmd)
	var strict []sqstypes.Message
	eventually(t, w, "the strict command through the slow function", func() bool {
		w.slowOnce(t)
		strict = append(strict, w.receive(t, w.strictURL)...)
		return len(strict) > 0
	})
	w.putEvents(t, strictCmd)

	// Telemetry: the outbox's stream through the drain to acme's queue.
	var acme []telemetryEvent
	eventually(t, w, "acme's telemetry (invalid, and the strict duplicate)", func() bool {
		w.slowOnce(t)
		w.drainOutbox(t)
		acme = append(acme, w.readTelemetry(t, "acme")...)
		return slices.ContainsFunc(acme, func(e telemetryEvent) bool { return e.Name == telemetry.NameInvalid }) &&
			slices.ContainsFunc(acme, func(e telemetryEvent) bool { return e.Name == telemetry.NameDuplicate })
	})
	// Whatever is still on its way (a second copy on the escalation queue)
	// is done before counting.
	for w.slowOnce(t) > 0 {
	}
	plain = append(plain, w.receive(t, w.plainURL)...)
	strict = append(strict, w.receive(t, w.strictURL)...)

	if len(plain) != 1 {
		t.Fatalf("the mailer queue holds %d messages, want the signed command once", len(plain))
	}
	var delivered struct {
		Metadata struct{ ID string } `json:"metadata"`
		Command  struct{ Source string }
	}
	if err := json.Unmarshal([]byte(aws.ToString(plain[0].Body)), &delivered); err != nil {
		t.Fatal(err)
	}
	if delivered.Command.Source != source || delivered.Metadata.ID != plainID {
		t.Fatalf("delivered %s", aws.ToString(plain[0].Body))
	}
	if len(strict) != 1 {
		t.Fatalf("the ledger queue holds %d messages, want the strict command once", len(strict))
	}
	count := func(name, id string) int {
		n := 0
		for _, e := range acme {
			if e.Name == name && (id == "" || e.CommandID == id) {
				n++
			}
		}
		return n
	}
	// A refusal is reported at least once: an invocation EventBridge or an
	// SDK retry repeats refuses again, and refusals keep no dedupe record
	// (once failed under -race on a loaded machine with two copies).
	if n := count(telemetry.NameInvalid, invalidID); n < 1 || n > 2 {
		t.Errorf("acme's telemetry %+v: want %s for %s once (twice at most, after a retry), got %d", acme, telemetry.NameInvalid, invalidID, n)
	}
	if count(telemetry.NameDelivered, plainID) != 1 || count(telemetry.NameDelivered, strictID) != 1 {
		t.Errorf("acme's telemetry %+v: want one %s for each delivered command", acme, telemetry.NameDelivered)
	}
	if count(telemetry.NameDuplicate, strictID) < 1 {
		t.Errorf("acme's telemetry %+v: want %s for the strict command's copy", acme, telemetry.NameDuplicate)
	}
	t.Logf("acme's telemetry queue: %+v", acme)

	// The stages' metrics, as EMF lines on each bootstrap's standard
	// output (CloudWatch Logs turns them into metrics on AWS).
	w.stop()
	ingest, slow := emfSums(t, w.stdout[lambda.FunctionIngest].String()), emfSums(t, w.stdout[lambda.FunctionSlow].String())
	if ingest[telemetry.MetricDedupStrictModeUsage] < 2 || ingest[telemetry.MetricDedupEscalations] < 1 || slow[telemetry.MetricDedupSlowPathLatency] <= 0 ||
		ingest[telemetry.MetricDedupDuplicatesPrevented]+slow[telemetry.MetricDedupDuplicatesPrevented] < 1 {
		t.Errorf("EMF metrics: ingest %v, slow %v: want the strict command's usage (2), escalation, slow-path latency and the duplicate prevented\ningest output:\n%s", ingest, slow, w.stdout[lambda.FunctionIngest].String()+w.output())
	}
}

// emfSums reads the EMF lines of out (other lines are the runtime's
// own) and sums each metric's values.
func emfSums(t *testing.T, out string) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) != nil || m["_aws"] == nil {
			continue
		}
		var meta struct {
			CloudWatchMetrics []struct {
				Namespace string
				Metrics   []struct{ Name, Unit string }
			}
		}
		if err := json.Unmarshal(m["_aws"], &meta); err != nil || len(meta.CloudWatchMetrics) != 1 || meta.CloudWatchMetrics[0].Namespace != lambda.EMFNamespace {
			t.Fatalf("EMF line without its directive: %s", line)
		}
		for _, metric := range meta.CloudWatchMetrics[0].Metrics {
			var v float64
			if json.Unmarshal(m[metric.Name], &v) != nil {
				var vs []float64
				if err := json.Unmarshal(m[metric.Name], &vs); err != nil {
					t.Fatalf("metric %s: %s", metric.Name, m[metric.Name])
				}
				for _, x := range vs {
					v += x
				}
			}
			sums[metric.Name] += v
		}
	}
	return sums
}
