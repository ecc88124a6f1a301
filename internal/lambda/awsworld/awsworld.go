// Package awsworld brings up, for tests, the platform on the emulators:
// the registry, flow and outbox tables on DynamoDB Local; kumo's SQS,
// SNS, STS and EventBridge; the environment's command bus and its rule
// to the ingest function (the real bootstrap, run through kumo's Lambda
// Runtime API); the slow function on the escalation queue; the outbox's
// stream drained to each tenant's SNS topic and telemetry queue; and the
// control API's Lambda host (lambda.NewControl) behind a SigV4-checking
// Function URL front (fnurltest). A client points an aws profile at it:
// Endpoint for every AWS service, ControlURL for the control API.
//
// Where kumo cannot run a hop the world does it, as the end-to-end test
// does (docs/testing.md): the escalation queue's and the outbox stream's
// event source mappings are a background pump, and the rule's Lambda
// target is an API destination whose endpoint invokes the ingest
// function asynchronously, as kumo's own Lambda target would (kumo finds
// its Lambda endpoint from KUMO_PORT, read once when the process starts).
package awsworld

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/lambda"
	"github.com/snavio/snavio/internal/platform/fnurltest"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/internal/syncbuf"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Account is the account kumo's STS answers for: the platform's.
const Account = "000000000000"

// Region is the world's region.
const Region = "us-east-1"

// DeliveryKey is the delivery master key the world's functions sign
// deliveries with (test material, never a secret).
var DeliveryKey = bytes.Repeat([]byte{7}, provenance.MinMasterLen)

// Options configure a world.
type Options struct {
	// Env names the environment (stack.Names); unique per world, since
	// kumo's state is shared by the whole process.
	Env string
	// DynamoDB is the DynamoDB Local the tables go on.
	DynamoDB *awstest.DynamoDBLocal
	// Kumo serves SQS, SNS, STS, IAM, Lambda and EventBridge: one per
	// process (awstest.Emulators.Kumo), since kumo's state is global and
	// starting servers concurrently races on it.
	Kumo *awstest.Kumo
	// Bootstrap is the built bootstrap binary (Bootstrap.Path).
	Bootstrap string
	// Tenants are on-boarded: emit role, telemetry topic, and a
	// telemetry queue subscribed to it.
	Tenants []string
}

// World is the platform on the emulators.
type World struct {
	Env string
	// Endpoint serves kumo (SQS, SNS, STS, IAM, EventBridge) behind the
	// front's STS tap, which hands the front the credentials STS issues.
	Endpoint string
	// ControlURL is the control API's Function URL front.
	ControlURL string
	// TelemetryQueues are the URLs of the tenants' own telemetry queues.
	TelemetryQueues map[string]string

	names     stack.Names
	s3        *httptest.Server
	front     *fnurltest.Server
	tap       *fnurltest.STSTap
	forward   *httptest.Server
	cfg       aws.Config
	sqs       *sqs.Client
	lambda    *awslambda.Client
	escURL    string
	slowFn    string
	drain     *lambda.OutboxDrain
	poll      *awstest.StreamPoller
	bootstrap string
	kumoURL   string
	ddbURL    string
	forwards  sync.WaitGroup // events the rule's target is invoking with
	// fnMu guards the functions' environments: created, running (their
	// bootstraps answer), inflight invocations and the last one's end.
	fnMu       sync.Mutex
	created    bool
	running    bool
	inflight   int
	last       time.Time
	bootMu     sync.Mutex
	bootstraps []*exec.Cmd
	logs       []*syncbuf.Buffer
	homes      []string

	stop    chan struct{}
	stopped chan struct{} // closed when the pump ends (nil: never started)
	mu      sync.Mutex
	pumpErr error
}

// OperatorRoleARN is the operator role an operator's profile assumes.
func (w *World) OperatorRoleARN() string {
	return "arn:aws:iam::" + Account + ":role" + w.names.OperatorRolePath() + w.names.OperatorRole()
}

// EmitRoleARN is tenant's emit role, which a producer's profile assumes.
func (w *World) EmitRoleARN(tenant string) (string, error) {
	name, err := w.names.EmitRole(tenant)
	if err != nil {
		return "", err
	}
	return "arn:aws:iam::" + Account + ":role" + w.names.EmitRolePath() + name, nil
}

// QueueARN is the ARN of a queue of the world's SQS.
func QueueARN(name string) string { return "arn:aws:sqs:" + Region + ":" + Account + ":" + name }

// Bootstrap builds the Lambda bootstrap once for a test binary.
type Bootstrap struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the bootstrap as `make lambda` does, on first use.
func (b *Bootstrap) Path() (string, error) {
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "snavio-awsworld"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "bootstrap")
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", b.path, "github.com/snavio/snavio/cmd/snavio-lambda")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build of the bootstrap: %v\n%s", err, out)
		}
	})
	return b.path, b.err
}

// Close removes the built binary.
func (b *Bootstrap) Close() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// Start brings the world up; Close takes it down. On an error, what was
// started is stopped.
func Start(ctx context.Context, o Options) (_ *World, err error) {
	if o.DynamoDB == nil || o.Kumo == nil || o.Bootstrap == "" || o.Env == "" {
		return nil, errors.New("awsworld: Options.Env, DynamoDB, Kumo and Bootstrap are required")
	}
	w := &World{Env: o.Env, names: stack.Names{Env: o.Env}, TelemetryQueues: map[string]string{}, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			err = fmt.Errorf("awsworld: %w\n%s", err, w.Logs())
			w.Close()
		}
	}()
	kumoURL := o.Kumo.Endpoint
	w.cfg = aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider("snavioTest", "snavioTest", "")}
	w.sqs = sqs.NewFromConfig(w.cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	w.lambda = awslambda.NewFromConfig(w.cfg, func(o *awslambda.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	eb := eventbridge.NewFromConfig(w.cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	rawSNS := sns.NewFromConfig(w.cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(kumoURL) })
	roles := iam.NewFromConfig(w.cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(kumoURL) })

	// The snapshot bucket the control API publishes to.
	w.s3 = httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	s3opt := func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(w.s3.URL), true }
	bucket := w.names.SnapshotBucket(Account)
	if _, err := s3.NewFromConfig(w.cfg, s3opt).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, fmt.Errorf("snapshot bucket: %w", err)
	}

	// The registry, flow and outbox tables.
	store := awsstore.Config{Env: o.Env, AWSConfig: o.DynamoDB.Config(), ClientOptions: o.DynamoDB.ClientOptions(), AccountID: Account,
		SnapshotBucket: bucket, S3Options: []func(*s3.Options){s3opt},
		SQSOptions: []func(*sqs.Options){func(o *sqs.Options) { o.BaseEndpoint = aws.String(kumoURL) }},
		SNSOptions: []func(*sns.Options){func(o *sns.Options) { o.BaseEndpoint = aws.String(kumoURL) }}}
	reg, err := awsstore.NewRegistryStore(store)
	if err != nil {
		return nil, err
	}
	fs, err := awsstore.NewFlowStore(store)
	if err != nil {
		return nil, err
	}
	ob, err := awsstore.NewOutboxStore(store)
	if err != nil {
		return nil, err
	}
	for _, create := range []func(context.Context) error{reg.CreateTables, fs.CreateTables, ob.CreateTables} {
		if err := create(ctx); err != nil {
			return nil, err
		}
	}

	// The control API's Lambda host behind the SigV4-checking front, and
	// kumo behind the tap that tells the front the credentials STS issues.
	ctl, err := lambda.NewControl(ctx, lambda.ControlConfig{Store: store, Roles: w.names,
		SnapshotKey: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize)), DeliveryKey: DeliveryKey, MetricsOut: io.Discard})
	if err != nil {
		return nil, fmt.Errorf("the control API: %w", err)
	}
	if w.front, err = fnurltest.New(fnurltest.Options{Region: Region, Env: o.Env, Function: ctl.Handle}); err != nil {
		return nil, err
	}
	w.ControlURL = w.front.URL
	if w.tap, err = fnurltest.NewSTSTap(kumoURL, w.front); err != nil {
		return nil, err
	}
	w.Endpoint = w.tap.URL

	// The escalation queue, and each tenant on-boarded as `snavio tenant
	// apply` leaves it: emit role, telemetry topic, the tenant's queue on
	// it. The platform's own topic takes the platform's events.
	esc, err := w.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(w.names.Queue("escalation"))})
	if err != nil {
		return nil, fmt.Errorf("escalation queue: %w", err)
	}
	w.escURL = aws.ToString(esc.QueueUrl)
	pub, err := awsstore.NewSNSPublisher(store)
	if err != nil {
		return nil, err
	}
	for _, tenant := range append([]string{telemetry.PlatformTenant}, o.Tenants...) {
		if tenant != telemetry.PlatformTenant {
			name, err := w.names.EmitRole(tenant)
			if err != nil {
				return nil, err
			}
			if _, err := roles.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: aws.String(w.names.EmitRolePath()),
				AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)}); err != nil {
				return nil, fmt.Errorf("emit role of %s: %w", tenant, err)
			}
		}
		arn, err := pub.TopicARN(tenant)
		if err != nil {
			return nil, err
		}
		topic, err := rawSNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(arn[strings.LastIndexByte(arn, ':')+1:])})
		if err != nil {
			return nil, fmt.Errorf("telemetry topic of %s: %w", tenant, err)
		}
		qname := arn[strings.LastIndexByte(arn, ':')+1:]
		q, err := w.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(qname)})
		if err != nil {
			return nil, err
		}
		w.TelemetryQueues[tenant] = aws.ToString(q.QueueUrl)
		if _, err := rawSNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(QueueARN(qname))}); err != nil {
			return nil, err
		}
	}
	// The outbox drain on kumo's SNS (whose missing PublishBatch the
	// adapter stands in for), fed from the stream by the pump.
	w.drain = lambda.NewOutboxDrain(pub.WithBatch(&awstest.KumoPublishBatch{SNS: rawSNS}), ob, lambda.OutboxConfig{})
	store.SetDefaults()
	if w.poll, err = awstest.NewStreamPoller(ctx, o.DynamoDB, store.OutboxTable()); err != nil {
		return nil, err
	}

	w.bootstrap, w.kumoURL, w.ddbURL = o.Bootstrap, kumoURL, o.DynamoDB.Endpoint
	ingestFn := w.names.Function(lambda.FunctionIngest)
	w.slowFn = w.names.Function(lambda.FunctionSlow)

	// The bus and its rule: commands to the ingest function, invoked
	// asynchronously by the API destination's endpoint.
	// It accepts the event at once, as Lambda's async invoke does (kumo's
	// delivery gives up after a few seconds, less than a cold start under
	// -race), then starts the functions if need be and invokes.
	w.forward = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.fail(fmt.Errorf("the rule's target: reading the event: %w", err))
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.forwards.Add(1)
		go func() {
			defer w.forwards.Done()
			err := w.begin(context.Background())
			if err == nil {
				_, err = w.lambda.Invoke(context.Background(), &awslambda.InvokeInput{FunctionName: aws.String(ingestFn), InvocationType: lambdatypes.InvocationTypeEvent, Payload: b})
				w.end()
			}
			if err != nil {
				w.fail(fmt.Errorf("the rule's target, invoking %s: %w", ingestFn, err))
			}
		}()
		rw.WriteHeader(http.StatusAccepted)
	}))
	bus := w.names.Bus()
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	conn, err := eb.CreateConnection(ctx, &eventbridge.CreateConnectionInput{Name: aws.String(o.Env + "-ingest"), AuthorizationType: ebtypes.ConnectionAuthorizationTypeApiKey,
		AuthParameters: &ebtypes.CreateConnectionAuthRequestParameters{ApiKeyAuthParameters: &ebtypes.CreateConnectionApiKeyAuthRequestParameters{ApiKeyName: aws.String("x-awsworld"), ApiKeyValue: aws.String("none")}}})
	if err != nil {
		return nil, fmt.Errorf("connection: %w", err)
	}
	dest, err := eb.CreateApiDestination(ctx, &eventbridge.CreateApiDestinationInput{Name: aws.String(o.Env + "-ingest"), ConnectionArn: conn.ConnectionArn,
		InvocationEndpoint: aws.String(w.forward.URL + "/" + ingestFn), HttpMethod: ebtypes.ApiDestinationHttpMethodPost})
	if err != nil {
		return nil, fmt.Errorf("api destination: %w", err)
	}
	pattern, _ := json.Marshal(map[string][]string{"detail-type": {envelope.EventType}})
	rule := w.names.Function("commands")
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus), EventPattern: aws.String(string(pattern)), State: ebtypes.RuleStateEnabled}); err != nil {
		return nil, err
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("ingest"), Arn: dest.ApiDestinationArn}}}); err != nil {
		return nil, err
	}
	w.stopped = make(chan struct{})
	go w.pump()
	return w, nil
}

// IdleShutdown is how long the functions' environments stay up without
// an invocation before the world shuts them down with SIGTERM, as Lambda
// shuts idle environments down (after minutes there). At SIGTERM the
// ingest and slow functions store the telemetry they kept (a delivered
// command's, docs/lambda.md); the next command starts new environments.
const IdleShutdown = 1500 * time.Millisecond

// begin makes sure the functions' environments run, starting them as
// Lambda does on demand (the functions then cold-load the registry as it
// is: a warm function learns a later key within its HMAC cache's TTL),
// and counts an invocation in flight until end.
func (w *World) begin(ctx context.Context) error {
	w.fnMu.Lock()
	defer w.fnMu.Unlock()
	if !w.running {
		if err := w.startFunctions(ctx); err != nil {
			return err
		}
		w.running = true
	}
	w.inflight++
	return nil
}

func (w *World) end() {
	w.fnMu.Lock()
	defer w.fnMu.Unlock()
	w.inflight--
	w.last = time.Now()
}

// shutdownIfIdle sends SIGTERM to idle environments and waits for them.
func (w *World) shutdownIfIdle() {
	w.fnMu.Lock()
	defer w.fnMu.Unlock()
	if !w.running || w.inflight > 0 || time.Since(w.last) < IdleShutdown {
		return
	}
	w.running = false
	w.bootMu.Lock()
	defer w.bootMu.Unlock()
	for _, c := range w.bootstraps {
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second): // Lambda's SIGKILL comes sooner
			_ = c.Process.Kill()
			<-done
		}
	}
	w.bootstraps = nil
}

// startFunctions creates the functions (once) and starts a bootstrap for
// each, ready once it answers; fnMu is held.
func (w *World) startFunctions(ctx context.Context) error {
	ingestFn, slowFn := w.names.Function(lambda.FunctionIngest), w.slowFn
	if !w.created {
		zipped, err := ZipBootstrap(w.bootstrap)
		if err != nil {
			return err
		}
		for _, fn := range []struct{ name, function string }{{ingestFn, lambda.FunctionIngest}, {slowFn, lambda.FunctionSlow}} {
			if _, err := w.lambda.CreateFunction(ctx, &awslambda.CreateFunctionInput{
				FunctionName: aws.String(fn.name), Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
				Role: aws.String("arn:aws:iam::" + Account + ":role" + w.names.FunctionRolePath() + w.names.FunctionRole(fn.function)), Timeout: aws.Int32(30),
				Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureX8664}, Code: &lambdatypes.FunctionCode{ZipFile: zipped},
			}); err != nil {
				return fmt.Errorf("function %s: %w", fn.name, err)
			}
		}
		w.created = true
	}
	for _, fn := range []struct{ name, function string }{{ingestFn, lambda.FunctionIngest}, {slowFn, lambda.FunctionSlow}} {
		if err := w.start(fn.name, fn.function); err != nil {
			return err
		}
	}
	// Ready once each function answers (kumo routes to a Runtime API
	// handler only after its first poll).
	if _, err := w.invoke(ctx, ingestFn, events.CloudWatchEvent{DetailType: "snavio.awsworld-ping", Source: "awsworld", Detail: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	if _, err := w.invoke(ctx, slowFn, events.SQSEvent{}); err != nil {
		return err
	}
	return nil
}

// ZipBootstrap is the function code of a built bootstrap: a zip holding
// it as "bootstrap", executable, as `make lambda` packs it.
func ZipBootstrap(bin string) ([]byte, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = zw.Close()
	}
	return buf.Bytes(), err
}

// start runs the bootstrap for one function against kumo's Runtime API,
// configured by the environment alone, as Lambda would.
func (w *World) start(name, function string) error {
	kumoURL, ddb := w.kumoURL, w.ddbURL
	cmd := exec.Command(w.bootstrap)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	home, err := os.MkdirTemp("", "snavio-awsworld-home")
	if err != nil {
		return err
	}
	w.homes = append(w.homes, home)
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(kumoURL, "http://") + "/_runtime/" + name,
		lambda.EnvFunction + "=" + function, lambda.EnvEnv + "=" + w.Env, lambda.EnvEscalationQueue + "=" + w.escURL,
		lambda.EnvDeliveryKey + "=" + base64.StdEncoding.EncodeToString(DeliveryKey),
		"AWS_LAMBDA_LOG_STREAM_NAME=" + name, "AWS_REGION=" + Region, "AWS_ACCESS_KEY_ID=snavioTest", "AWS_SECRET_ACCESS_KEY=snavioTest",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL_DYNAMODB=" + ddb, "AWS_ENDPOINT_URL_SQS=" + kumoURL, "HOME=" + home,
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.bootMu.Lock()
	w.bootstraps = append(w.bootstraps, cmd)
	w.logs = append(w.logs, logs)
	w.bootMu.Unlock()
	return nil
}

// invoke calls fn synchronously with payload, retrying until kumo has a
// handler for it, and returns the answer.
func (w *World) invoke(ctx context.Context, fn string, payload any) ([]byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := w.lambda.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: b})
		if err == nil && out.FunctionError == nil {
			return out.Payload, nil
		}
		if err == nil {
			return nil, fmt.Errorf("%s failed: %s: %s", fn, aws.ToString(out.FunctionError), out.Payload)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not answer within 60 s: %w", fn, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pump runs the event source mappings kumo does not have until Close:
// the escalation queue to the slow function, the outbox's stream to the
// drain.
func (w *World) pump() {
	defer close(w.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-w.stop; cancel() }()
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := w.slowOnce(ctx); err != nil && ctx.Err() == nil {
			w.fail(err)
		}
		if err := w.drainOutbox(ctx); err != nil && ctx.Err() == nil {
			w.fail(err)
		}
		w.shutdownIfIdle()
	}
}

func (w *World) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pumpErr == nil {
		w.pumpErr = err
	}
}

// slowOnce stands in for the escalation queue's event source mapping:
// it receives a batch, invokes the slow function with it, and deletes
// the records the answer does not report failed.
func (w *World) slowOnce(ctx context.Context) (int, error) {
	got, err := w.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.escURL), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil || len(got.Messages) == 0 {
		return 0, err
	}
	if err := w.begin(ctx); err != nil {
		return 0, err
	}
	defer w.end()
	var ev events.SQSEvent
	for _, m := range got.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", AWSRegion: Region})
	}
	out, err := w.invoke(ctx, w.slowFn, ev)
	if err != nil {
		return 0, err
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, err
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
			return 0, err
		}
	}
	return len(got.Messages), nil
}

// drainOutbox stands in for the outbox stream's event source mapping.
func (w *World) drainOutbox(ctx context.Context) error {
	ev, err := w.poll.Poll(ctx)
	if err != nil || len(ev.Records) == 0 {
		return err
	}
	resp, err := w.drain.Handle(ctx, ev)
	if err == nil && len(resp.BatchItemFailures) > 0 {
		err = fmt.Errorf("%d records failed", len(resp.BatchItemFailures))
	}
	if err != nil {
		return fmt.Errorf("outbox drain: %w", err)
	}
	return nil
}

// Err is the first error of the pump or the rule's target, if any.
func (w *World) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pumpErr
}

// Logs is every bootstrap's log, for a failure message.
func (w *World) Logs() string {
	w.bootMu.Lock()
	defer w.bootMu.Unlock()
	var b strings.Builder
	for i, l := range w.logs {
		fmt.Fprintf(&b, "--- bootstrap %d:\n%s\n", i, l.String())
	}
	return b.String()
}

// Close stops the pump, the bootstraps and the servers, and returns the
// pump's first error.
func (w *World) Close() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
		if w.stopped != nil {
			<-w.stopped
		}
	}
	for _, s := range []*httptest.Server{w.forward} {
		if s != nil {
			s.Close() // no new command starts the functions
		}
	}
	w.forwards.Wait()
	w.bootMu.Lock()
	for _, c := range w.bootstraps {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	w.bootstraps = nil
	for _, h := range w.homes {
		_ = os.RemoveAll(h)
	}
	w.homes = nil
	w.bootMu.Unlock()
	for _, s := range []*httptest.Server{w.s3} {
		if s != nil {
			s.Close()
		}
	}
	if w.tap != nil {
		w.tap.Close()
	}
	if w.front != nil {
		w.front.Close()
	}
	return w.Err()
}
