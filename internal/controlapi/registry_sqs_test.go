package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/ssefake"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// The dispatcher's roles live in account 111111111111; kumo's queues in
// 000000000000, so every kumo queue is "another account's" and its policy
// must grant the roles.
const (
	dispAcct   = "111111111111"
	ingestRole = "arn:aws:iam::" + dispAcct + ":role/snavio/test/fn/snavio-test-fn-ingest"
	slowRole   = "arn:aws:iam::" + dispAcct + ":role/snavio/test/fn/snavio-test-fn-slow"
	monRole    = "arn:aws:iam::" + dispAcct + ":role/snavio/test/fn/snavio-test-fn-queue-monitor"
	kumoARN    = "arn:aws:sqs:us-east-1:000000000000:"
)

var testRoles = DispatcherRoles{Senders: []string{ingestRole, slowRole}, Monitor: monRole}

// grants is a queue policy letting the dispatcher's roles deliver to and
// inspect queue.
func grants(queue string) string {
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{
		map[string]any{"Sid": "Deliver", "Effect": "Allow", "Principal": map[string]any{"AWS": []string{ingestRole, slowRole}}, "Action": []string{"sqs:SendMessage", "sqs:GetQueueUrl"}, "Resource": kumoARN + queue},
		map[string]any{"Sid": "Inspect", "Effect": "Allow", "Principal": map[string]any{"AWS": monRole}, "Action": []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, "Resource": kumoARN + queue},
	}})
	return string(b)
}

// kumoQueues starts kumo with the queues of the tests: orders (redrive to
// orders-dlq, SSE-SQS, the grants), plain (nothing), kms (SSE-KMS, the
// grants, redrive), and returns the SQS client. kumo keeps RedrivePolicy,
// Policy and FifoQueue; it drops the encryption attributes, which
// ssefake keeps.
func kumoQueues(t *testing.T) *ssefake.Client {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	c := ssefake.New(sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) }))
	ctx := t.Context()
	create := func(name string, attrs map[string]string) {
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	redrive := func(dlq string) string {
		return `{"deadLetterTargetArn":"` + kumoARN + dlq + `","maxReceiveCount":"5"}`
	}
	create("orders-dlq", map[string]string{"SqsManagedSseEnabled": "true"})
	create("orders", map[string]string{"RedrivePolicy": redrive("orders-dlq"), "SqsManagedSseEnabled": "true", "Policy": grants("orders")})
	create("plain", nil)
	create("kms", map[string]string{"RedrivePolicy": redrive("orders-dlq"), "KmsMasterKeyId": "alias/aws/sqs", "Policy": grants("kms")})
	return c
}

func TestSQSRouteQueuesAgainstKumo(t *testing.T) {
	c := kumoQueues(t)
	q, err := SQSRouteQueues(c, "us-east-1", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	info, err := q.Queue(ctx, kumoARN+"orders")
	if err != nil || info.FIFO || info.Opaque || info.DeadLetterARN != kumoARN+"orders-dlq" || len(info.Problems) != 0 {
		t.Fatalf("orders = %+v, %v; want its DLQ and no problem", info, err)
	}
	if _, err := q.Queue(ctx, kumoARN+"nope"); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("missing queue: %v; want ErrNoQueue", err)
	}
	if _, err := q.Queue(ctx, "arn:snavio:sqs:local:000000000000:orders"); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("local queue: %v; want ErrNoQueue", err)
	}

	info, err = q.Queue(ctx, kumoARN+"plain")
	if err != nil {
		t.Fatal(err)
	}
	got := problems(info)
	for _, want := range []string{"it is not encrypted at rest", "its policy does not let " + ingestRole + " call sqs:SendMessage, sqs:GetQueueUrl",
		"its policy does not let " + slowRole + " call sqs:SendMessage, sqs:GetQueueUrl", "its policy does not let " + monRole + " call sqs:GetQueueAttributes, sqs:GetQueueUrl",
		"no statement allows it, and the queue's account 000000000000 is not the role's 111111111111"} {
		if !strings.Contains(got, want) {
			t.Errorf("plain: problems %s; want %q", got, want)
		}
	}
	if info.DeadLetterARN != "" {
		t.Errorf("plain has DLQ %q", info.DeadLetterARN)
	}

	// The AWS-managed key cannot be used by roles of another account.
	info, err = q.Queue(ctx, kumoARN+"kms")
	if err != nil || len(info.Problems) != 1 || !strings.Contains(info.Problems[0].Problem, "alias/aws/sqs") {
		t.Fatalf("kms = %+v, %v", info, err)
	}
	// With roles of the queue's own account it is fine, and no grant is
	// needed: their own policies allow delivery to any queue.
	same := DispatcherRoles{Senders: []string{"arn:aws:iam::000000000000:role/snavio/test/fn/snavio-test-fn-ingest"}, Monitor: "arn:aws:iam::000000000000:role/snavio/test/fn/snavio-test-fn-queue-monitor"}
	qs, err := SQSRouteQueues(c, "us-east-1", same)
	if err != nil {
		t.Fatal(err)
	}
	if info, err = qs.Queue(ctx, kumoARN+"kms"); err != nil || len(info.Problems) != 0 {
		t.Fatalf("kms, same account = %+v, %v", info, err)
	}
	if info, err = qs.Queue(ctx, kumoARN+"plain"); err != nil || problems(info) != "it is not encrypted at rest" {
		t.Fatalf("plain, same account = %+v, %v; want only the encryption", info, err)
	}
}

func problems(info QueueInfo) string {
	var out []string
	for _, p := range info.Problems {
		out = append(out, p.Problem)
	}
	return strings.Join(out, "; ")
}

// TestSQSTestRoutingThroughTheAPI registers routes through the control
// API with the SQS port: a good route is written, a bad one refused with
// 422 naming the queue, each problem and its fix.
func TestSQSTestRoutingThroughTheAPI(t *testing.T) {
	q, err := SQSRouteQueues(kumoQueues(t), "us-east-1", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	reg := memstore.NewRegistry()
	api, err := NewRegistryAPI(RegistryOptions{Registry: reg, Clock: clock.NewFake(t0), Queues: q, Auth: ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(servertest.OperatorAndAcme().Handler(api.Handler()))
	t.Cleanup(srv.Close)
	e := &registryEnv{srv: srv}
	route := func(queue, dlq string) registry.Item {
		return registry.Item{Route: &registry.Route{Target: "orders", Command: "create", QueueARN: kumoARN + queue, DLQARN: kumoARN + dlq}}
	}
	var res wire.ApplyResult
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{route("orders", "orders-dlq")}, DryRun: true}, &res); st != http.StatusOK {
		t.Fatalf("good route: %d %+v", st, res)
	}
	var er map[string]string
	st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{route("plain", "orders-dlq")}}, &er)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("bad route: %d %v", st, er)
	}
	for _, want := range []string{"route orders create: queue " + kumoARN + "plain: it is not encrypted at rest",
		"queue " + kumoARN + "plain: its policy does not let " + ingestRole + " call sqs:SendMessage",
		"queue " + kumoARN + "plain has no dead-letter queue"} {
		if !strings.Contains(er["error"], want) {
			t.Errorf("error %q; want %q", er["error"], want)
		}
	}
	if !strings.Contains(er["fix"], "SqsManagedSseEnabled=true") || !strings.Contains(er["fix"], "add a statement allowing sqs:SendMessage, sqs:GetQueueUrl to principal "+ingestRole) {
		t.Errorf("fix %q", er["fix"])
	}
	if d, _ := reg.Load(t.Context(), t0); d.Len() != 0 {
		t.Fatalf("a refused registration wrote %+v", d)
	}
}

// deniedSQS answers GetQueueUrl and refuses GetQueueAttributes, as SQS
// does for a queue of another account that grants GetQueueUrl alone
// (kumo checks no permission).
type deniedSQS struct{}

func (deniedSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.eu-west-1.amazonaws.com/222222222222/" + aws.ToString(in.QueueName))}, nil
}

func (deniedSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized"}
}

func TestSQSRouteQueuesUnreadable(t *testing.T) {
	q, err := SQSRouteQueues(deniedSQS{}, "us-east-1", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.Queue(t.Context(), "arn:aws:sqs:eu-west-1:222222222222:theirs")
	if err != nil || !info.Opaque || !strings.Contains(problems(info), "may not read its attributes (AccessDenied)") || !strings.Contains(info.Problems[0].Fix, monRole) {
		t.Fatalf("= %+v, %v", info, err)
	}
}

func TestSQSRouteQueuesRefusesBadRoles(t *testing.T) {
	for name, r := range map[string]DispatcherRoles{
		"no sender":  {Monitor: monRole},
		"no monitor": {Senders: []string{ingestRole}},
		"bad arn":    {Senders: []string{"ingest"}, Monitor: monRole},
	} {
		if _, err := SQSRouteQueues(deniedSQS{}, "us-east-1", r); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSQSRouteQueuesNeedsGetQueueUrl: a grant of SendMessage alone is not
// enough for another account's queue: the dispatcher resolves its URL
// first.
func TestSQSRouteQueuesNeedsGetQueueUrl(t *testing.T) {
	c := kumoQueues(t)
	ctx := t.Context()
	u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	sendOnly := strings.ReplaceAll(grants("orders"), `["sqs:SendMessage","sqs:GetQueueUrl"]`, `"sqs:SendMessage"`)
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: u.QueueUrl, Attributes: map[string]string{"Policy": sendOnly}}); err != nil {
		t.Fatal(err)
	}
	q, err := SQSRouteQueues(c, "us-east-1", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.Queue(ctx, kumoARN+"orders")
	if err != nil || !strings.Contains(problems(info), "its policy does not let "+ingestRole+" call sqs:GetQueueUrl:") || strings.Contains(problems(info), "SendMessage") {
		t.Fatalf("= %+v, %v; want GetQueueUrl missing for the senders", info, err)
	}
}
