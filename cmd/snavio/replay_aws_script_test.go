package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/platform/fnurltest"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// The emulators of the aws-profile replay scripts: kumo in-process (SQS,
// EventBridge PutEvents, STS) and DynamoDB Local, started once for the
// test binary on first use. DynamoDB Local's launcher exits when this
// process does (its stdin closes).
var (
	scriptDDBOnce sync.Once
	scriptDDB     *awstest.DynamoDBLocal
	scriptDDBErr  error
	scriptEmu     awstest.Emulators
	scriptEnvs    sync.Map // *testscript.TestScript -> *replayAWSEnv
	scriptSeq     int64
	scriptSeqMu   sync.Mutex
)

// dynamoDBCondition is the script condition [dynamodb]: DynamoDB Local
// runs. In CI (CI=true) its absence fails the script instead.
func dynamoDBCondition() (bool, error) {
	scriptDDBOnce.Do(func() { scriptDDB, scriptDDBErr = awstest.StartDynamoDBLocal(context.Background()) })
	if scriptDDBErr != nil {
		if os.Getenv("CI") == "true" {
			return false, fmt.Errorf("CI=true and DynamoDB Local cannot start: %w", scriptDDBErr)
		}
		return false, nil
	}
	return true, nil
}

// replayAWSEnv is one script's environment on the emulators.
type replayAWSEnv struct {
	fn     *fnurltest.Server
	env    string
	sqs    *sqs.Client
	dlqURL string
	master *provenance.Signer
}

var scriptSecret = bytes.Repeat([]byte("s"), 32)

// replayAWS implements the script command
//
//	replay-aws start | dead-letter N signed|unsigned | count | id FILE | requests
//
// for `snavio replay` on an aws profile. "start" (after [dynamodb])
// makes an environment on the emulators: the flow and registry tables on
// DynamoDB Local with a key for demo/app and a route to mailer, the
// mailer queue and DLQ and the env's bus on kumo, and the control API as
// the control function serves it (registry, delivery keys, replayer over
// DynamoDB Local) behind a fake Function URL that checks SigV4 and maps
// the script's credentials to the operator role. It points the SDK's
// SQS, EventBridge and STS endpoints at kumo (none at DynamoDB: the CLI
// must not need it) and sets $ENV, $DLQ and $FNURL. "dead-letter" puts
// command N into the DLQ as the dispatcher delivered it, with its
// delivery signature or none (a planted message); "count" prints how
// many messages the DLQ holds; "id" sets $ID from a replay's JSON
// output; "requests" prints the control API requests since the last.
func replayAWS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: replay-aws start | dead-letter N signed|unsigned | count | id FILE")
	}
	ctx := context.Background()
	if args[0] == "start" {
		e := startReplayAWS(ts)
		scriptEnvs.Store(ts, e)
		return
	}
	v, ok := scriptEnvs.Load(ts)
	if !ok {
		ts.Fatalf("replay-aws %s: run replay-aws start first", args[0])
	}
	e := v.(*replayAWSEnv)
	switch {
	case args[0] == "dead-letter" && len(args) == 3:
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		e.deadLetter(ts, n, args[2] == "signed")
	case args[0] == "count" && len(args) == 1:
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.dlqURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		ts.Check(err)
		a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
		b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
		fmt.Fprintln(ts.Stdout(), a+b)
	case args[0] == "id" && len(args) == 2:
		var a struct {
			ID string `json:"id"`
		}
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[1])), &a))
		if a.ID == "" {
			ts.Fatalf("replay-aws id: %s has no id", args[1])
		}
		ts.Setenv("ID", a.ID)
	case args[0] == "requests" && len(args) == 1:
		for _, r := range e.fn.Requests() {
			fmt.Fprintf(ts.Stdout(), "%s %s %d\n", r.Method, r.Path, r.Status)
		}
	default:
		ts.Fatalf("replay-aws: bad arguments %q", args)
	}
}

func startReplayAWS(ts *testscript.TestScript) *replayAWSEnv {
	ctx := context.Background()
	if scriptDDB == nil {
		ts.Fatalf("replay-aws start: check [dynamodb] first")
	}
	k := scriptEmu.Kumo()
	scriptSeqMu.Lock()
	scriptSeq++
	env := "s" + strconv.Itoa(os.Getpid()) + "r" + strconv.FormatInt(scriptSeq, 10)
	scriptSeqMu.Unlock()
	names := stack.Names{Env: env}
	sc := awsstore.Config{Env: env, AWSConfig: scriptDDB.Config(), ClientOptions: scriptDDB.ClientOptions()}
	flow, err := awsstore.NewFlowStore(sc)
	ts.Check(err)
	reg, err := awsstore.NewRegistryStore(sc)
	ts.Check(err)
	ts.Check(errors.Join(flow.CreateTables(ctx), reg.CreateTables(ctx)))
	sq := sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
	queue := func(name string) (string, string) {
		q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		ts.Check(err)
		a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		ts.Check(err)
		return aws.ToString(q.QueueUrl), a.Attributes["QueueArn"]
	}
	_, queueARN := queue(names.Queue("mailer"))
	dlqURL, dlqARN := queue(names.Queue("mailer-dlq"))
	eb := eventbridge.NewFromConfig(k.Config(), func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(k.Endpoint) })
	_, err = eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(names.Bus())})
	ts.Check(err)
	now := time.Now()
	by := registry.Actor{Who: "script", At: now}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: "demo/app", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: scriptSecret, ActivatedAt: now.Add(-time.Hour)}}}},
		{Route: &registry.Route{Target: "mailer", Command: "send", QueueARN: queueARN, DLQARN: dlqARN}},
	} {
		_, err := reg.Put(ctx, by, it)
		ts.Check(err)
	}
	master, err := provenance.NewSigner(bytes.Repeat([]byte{5}, 32))
	ts.Check(err)
	audits, err := awsstore.NewReplayAudits(sc, 0)
	ts.Check(err)
	fn, err := fnurltest.New(fnurltest.Options{Env: env, API: func(auth controlapi.Authenticator) (http.Handler, error) {
		leftOut := map[controlapi.Resource]controlapi.Absence{}
		for _, r := range controlapi.Resources {
			if r != controlapi.ResourceRegistry && r != controlapi.ResourceDelivery && r != controlapi.ResourceReplayer {
				leftOut[r] = controlapi.Absence{Code: fnurltest.NotServedCode, Why: string(r) + " is not served here", Instead: "the script serves what a replay needs"}
			}
		}
		return controlapi.New(controlapi.Config{Auth: auth,
			Registry: controlapi.RegistryOptions{Registry: reg},
			Delivery: controlapi.DeliveryOptions{Signer: master, Registry: reg},
			Replayer: controlapi.ReplayerOptions{Audits: audits, Registry: reg, Delivery: master},
			LeftOut:  leftOut})
	}})
	ts.Check(err)
	ts.Defer(fn.Close)
	fn.AddKey("AKIDSCRIPT", "script", "", "arn:aws:sts::"+fnurltest.Account+":assumed-role/"+names.OperatorRole()+"/script")
	home := ts.Getenv("HOME")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_SQS": k.Endpoint, "AWS_ENDPOINT_URL_EVENTBRIDGE": k.Endpoint, "AWS_ENDPOINT_URL_STS": k.Endpoint,
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDSCRIPT", "AWS_SECRET_ACCESS_KEY": "script",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "aws-credentials"),
		"ENV":                         env, "DLQ": names.Queue("mailer-dlq"), "FNURL": fn.URL,
	} {
		ts.Setenv(k, v)
	}
	return &replayAWSEnv{fn: fn, env: env, sqs: sq, dlqURL: dlqURL, master: master}
}

// deadLetter puts command n into the DLQ as the dispatcher delivered it.
func (e *replayAWSEnv) deadLetter(ts *testscript.TestScript, n int, signed bool) {
	id := fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n)
	env := envelope.New(id, time.Now().Add(-time.Minute), "mailer", "send", []byte(`{"n":`+strconv.Itoa(n)+`}`))
	env.Metadata.VersionID = "hmac-v1"
	key, err := signing.NewKey("hmac-v1", scriptSecret)
	ts.Check(err)
	ts.Check(key.SignEnvelope(&env, "demo/app"))
	env.Command.Source = "demo/app"
	body, err := env.AppendJSON(nil)
	ts.Check(err)
	m := provenance.Message{CommandID: id, Source: "demo/app", Target: "mailer", Command: "send", Body: body}
	if signed {
		ts.Check(e.master.Sign(&m))
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range m.Attributes() {
		if v != "" {
			attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	_, err = e.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.dlqURL), MessageBody: aws.String(string(body)), MessageAttributes: attrs})
	ts.Check(err)
}
