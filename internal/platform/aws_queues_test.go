package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
)

// kumo keeps its queues in package-level state: each test names its own.
var queueSeq atomic.Int64

func uniqueQueue(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, os.Getpid(), queueSeq.Add(1))
}

// awsEnv makes the SDK find test credentials and nothing from the
// machine's ~/.aws.
func awsEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_SQS": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
}

// kumoAWS is an aws platform whose endpoint is an in-process kumo, with
// the SDK configuration loaded as a profile's is (AWSConfig), and
// an SQS client on kumo to seed and inspect queues.
func kumoAWS(t *testing.T, env string) (*AWS, *sqs.Client, *awstest.Calls) {
	t.Helper()
	awsEnv(t)
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	calls := &awstest.Calls{}
	p := &AWS{target: Target{Kind: "aws", Region: "us-east-1", Endpoint: srv.URL, Env: env}}
	p.sdk.load = func(ctx context.Context) (awssdk.Config, error) {
		cfg, err := AWSConfig(ctx, p.target, p.target.Region)
		cfg.APIOptions = append(cfg.APIOptions, calls.Count)
		return cfg, err
	}
	direct := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test", "")})
	return p, direct, calls
}

func TestAWSQueuesOnKumo(t *testing.T) {
	ctx := context.Background()
	p, direct, calls := kumoAWS(t, "")
	dlq, q := uniqueQueue("mailer-dlq"), uniqueQueue("mailer")

	// create: the DLQ, then the queue redriving to it.
	res, err := p.CreateQueue(ctx, wire.QueueCreateRequest{Name: dlq})
	if err != nil || !res.Created || res.Name != dlq || res.DeadLetterQueue != "" {
		t.Fatalf("create dlq: %+v %v", res, err)
	}
	calls.Take()
	res, err = p.CreateQueue(ctx, wire.QueueCreateRequest{Name: q, DeadLetterQueue: dlq, MaxReceives: 3, VisibilityTimeoutSeconds: 45})
	if err != nil || !res.Created || res.DeadLetterQueue != dlq || res.MaxReceives != 3 || res.VisibilityTimeoutSeconds != 45 || !strings.HasSuffix(res.ARN, ":"+q) {
		t.Fatalf("create: %+v %v", res, err)
	}
	// The DLQ's URL is known from its create: GetQueueAttributes (its ARN),
	// GetQueueUrl (not there yet), CreateQueue, GetQueueAttributes.
	if got := calls.Take().Ops().String(); got != "CreateQueue=1 GetQueueAttributes=2 GetQueueUrl=1" {
		t.Errorf("create calls: %s", got)
	}
	u, err := direct.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(q)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := direct.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Attributes["MaximumMessageSize"] != "1048576" || !strings.Contains(a.Attributes["RedrivePolicy"], `"maxReceiveCount":"3"`) {
		t.Errorf("attributes: %v", a.Attributes)
	}
	// Again with the same settings: not created, no error.
	if res, err := p.CreateQueue(ctx, wire.QueueCreateRequest{Name: q, DeadLetterQueue: dlq, MaxReceives: 3, VisibilityTimeoutSeconds: 45}); err != nil || res.Created {
		t.Fatalf("create again: %+v %v", res, err)
	}
	if _, err := p.CreateQueue(ctx, wire.QueueCreateRequest{Name: uniqueQueue("x"), MaxDepth: 10}); err == nil || !strings.Contains(err.Error(), "no depth limit") {
		t.Errorf("max depth: %v", err)
	}
	if _, err := p.CreateQueue(ctx, wire.QueueCreateRequest{Name: uniqueQueue("x"), DeadLetterQueue: uniqueQueue("nope")}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing dlq: %v", err)
	}

	// Two messages with attributes, then get, list, receive, delete.
	for i := range 2 {
		_, err := direct.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: awssdk.String(fmt.Sprintf(`{"n":%d}`, i)),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"snavio.source": {DataType: awssdk.String("String"), StringValue: awssdk.String("acme/billing")}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	info, err := p.GetQueue(ctx, q)
	if err != nil || info.Visible != 2 || info.InFlight != 0 || info.DeadLetterQueue != dlq || info.CreatedAt.IsZero() || info.Reserved {
		t.Fatalf("get: %+v %v", info, err)
	}
	l, err := p.ListQueuesPrefix(ctx, strings.TrimSuffix(q, q[strings.LastIndexByte(q, '-'):]), "", 10)
	if err != nil || len(l.Queues) == 0 {
		t.Fatalf("list: %+v %v", l, err)
	}
	found := false
	for i, x := range l.Queues {
		found = found || x.Name == q && x.Visible == 2
		if i > 0 && l.Queues[i-1].Name >= x.Name {
			t.Errorf("list not in name order: %s before %s", l.Queues[i-1].Name, x.Name)
		}
	}
	if !found {
		t.Errorf("list: %s not listed with 2 visible: %+v", q, l.Queues)
	}

	calls.Take()
	got, err := p.ReceiveMessages(ctx, q, wire.QueueReceiveRequest{Max: 10, VisibilityTimeoutSeconds: 60})
	if err != nil || len(got.Messages) != 2 {
		t.Fatalf("receive: %+v %v", got, err)
	}
	if c := calls.Take().Ops().String(); c != "ReceiveMessage=1" {
		t.Errorf("receive calls: %s", c)
	}
	m := got.Messages[0]
	if m.Attributes["snavio.source"] != "acme/billing" || m.ReceiveCount != 1 || m.SentAt.IsZero() || m.ReceiptHandle == "" || m.BodyEncoding != "utf-8" || !strings.HasPrefix(m.Body, `{"n":`) {
		t.Errorf("message: %+v", m)
	}
	if info, _ := p.GetQueue(ctx, q); info.InFlight != 2 || info.Visible != 0 {
		t.Errorf("after receive: %+v", info)
	}
	calls.Take()
	del, err := p.DeleteMessages(ctx, q, wire.QueueDeleteRequest{ReceiptHandles: []string{got.Messages[0].ReceiptHandle, "not-a-handle", got.Messages[1].ReceiptHandle}})
	if err != nil {
		t.Fatal(err)
	}
	if r := del.Results; len(r) != 3 || !r[0].Deleted || r[1].Deleted || r[1].Code != "invalid_receipt" || r[1].ReceiptHandle != "not-a-handle" || !r[2].Deleted {
		t.Errorf("delete: %+v", del)
	}
	if c := calls.Take().Ops().String(); c != "DeleteMessageBatch=1" {
		t.Errorf("delete calls: %s", c)
	}

	// purge: the approximate count before it, then nothing left.
	if _, err := direct.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: awssdk.String("x")}); err != nil {
		t.Fatal(err)
	}
	pr, err := p.PurgeQueue(ctx, q)
	if err != nil || pr.Purged != 1 || pr.Queue != q {
		t.Fatalf("purge: %+v %v", pr, err)
	}
	if info, _ := p.GetQueue(ctx, q); info.Visible+info.InFlight != 0 {
		t.Errorf("after purge: %+v", info)
	}

	// A queue that does not exist names itself and the fix.
	missing := uniqueQueue("missing")
	for name, f := range map[string]func() error{
		"get":     func() error { _, err := p.GetQueue(ctx, missing); return err },
		"receive": func() error { _, err := p.ReceiveMessages(ctx, missing, wire.QueueReceiveRequest{Max: 1}); return err },
		"delete": func() error {
			_, err := p.DeleteMessages(ctx, missing, wire.QueueDeleteRequest{ReceiptHandles: []string{"h"}})
			return err
		},
		"purge": func() error { _, err := p.PurgeQueue(ctx, missing); return err },
	} {
		err := f()
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "queue "+missing+" does not exist") || !strings.Contains(err.Error(), "snavio queue list") {
			t.Errorf("%s of a missing queue: %v", name, err)
		}
	}
}

func TestAWSQueuesReserveTheEscalationQueue(t *testing.T) {
	ctx := context.Background()
	env := fmt.Sprintf("r%d", queueSeq.Add(1))
	p, _, _ := kumoAWS(t, env)
	name := "snavio-" + env + "-escalation"
	if _, err := p.CreateQueue(ctx, wire.QueueCreateRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	if info, err := p.GetQueue(ctx, name); err != nil || !info.Reserved {
		t.Fatalf("get: %+v %v", info, err)
	}
	if _, err := p.PurgeQueue(ctx, name); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("purge: %v", err)
	}
	if _, err := p.ReceiveMessages(ctx, name, wire.QueueReceiveRequest{Max: 1}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("receive: %v", err)
	}
}

// fakeSQS answers SQS's JSON protocol for what kumo does not model:
// ListQueues pages with NextToken, and PurgeQueue's once-a-minute limit.
func fakeSQS(t *testing.T, pages [][]string) (*AWS, *[]string) {
	t.Helper()
	awsEnv(t)
	var tokens []string
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var in map[string]any
		_ = json.Unmarshal(b, &in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "AmazonSQS.ListQueues":
			tok, _ := in["NextToken"].(string)
			tokens = append(tokens, tok)
			i := 0
			if tok != "" {
				_, _ = fmt.Sscanf(tok, "page-%d", &i)
			}
			out := map[string]any{"QueueUrls": []string{}}
			var urls []string
			for _, n := range pages[i] {
				urls = append(urls, srv.URL+"/123456789012/"+n)
			}
			out["QueueUrls"] = urls
			if i+1 < len(pages) {
				out["NextToken"] = fmt.Sprintf("page-%d", i+1)
			}
			_ = json.NewEncoder(w).Encode(out)
		case "AmazonSQS.GetQueueAttributes":
			u, _ := in["QueueUrl"].(string)
			if queueName(u) == "gone" {
				w.Header().Set("X-Amzn-Query-Error", "AWS.SimpleQueueService.NonExistentQueue;Sender")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"Attributes": map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:123456789012:" + queueName(u),
				"ApproximateNumberOfMessages": "4", "ApproximateNumberOfMessagesNotVisible": "1", "ApproximateNumberOfMessagesDelayed": "2", "VisibilityTimeout": "30"}})
		case "AmazonSQS.GetQueueUrl":
			_ = json.NewEncoder(w).Encode(map[string]any{"QueueUrl": srv.URL + "/123456789012/" + in["QueueName"].(string)})
		case "AmazonSQS.PurgeQueue":
			w.Header().Set("X-Amzn-Query-Error", "AWS.SimpleQueueService.PurgeQueueInProgress;Sender")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#PurgeQueueInProgress","message":"Only one PurgeQueue operation on q is allowed every 60 seconds."}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#InvalidAction","message":"not in the fake"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return &AWS{target: Target{Kind: "aws", Region: "us-east-1", Endpoint: srv.URL}}, &tokens
}

func TestAWSListQueuesPagesAndOrders(t *testing.T) {
	p, tokens := fakeSQS(t, [][]string{{"c", "a"}, {"e", "b"}, {"d"}})
	l, err := p.ListQueues(context.Background(), "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(*tokens, ",") != ",page-1,page-2" {
		t.Errorf("NextTokens sent: %q", *tokens)
	}
	if len(l.Queues) != 2 || l.Queues[0].Name != "a" || l.Queues[1].Name != "b" || l.Next == nil || *l.Next != "b" || l.Queues[0].Visible != 4 {
		t.Fatalf("page 1: %+v", l)
	}
	l, err = p.ListQueues(context.Background(), *l.Next, 2)
	if err != nil || len(l.Queues) != 2 || l.Queues[0].Name != "c" || l.Queues[1].Name != "d" {
		t.Fatalf("page 2: %+v %v", l, err)
	}
	l, err = p.ListQueues(context.Background(), *l.Next, 2)
	if err != nil || len(l.Queues) != 1 || l.Queues[0].Name != "e" || l.Next != nil {
		t.Fatalf("page 3: %+v %v", l, err)
	}
}

// A queue deleted between ListQueues and its GetQueueAttributes is left
// out of the list.
func TestAWSListQueuesSkipsAVanishedQueue(t *testing.T) {
	p, _ := fakeSQS(t, [][]string{{"b", "gone", "a"}})
	l, err := p.ListQueues(context.Background(), "", 10)
	if err != nil || len(l.Queues) != 2 || l.Queues[0].Name != "a" || l.Queues[1].Name != "b" || l.Next != nil {
		t.Fatalf("%+v %v", l, err)
	}
}

func TestAWSPurgeOncePerMinute(t *testing.T) {
	p, _ := fakeSQS(t, nil)
	_, err := p.PurgeQueue(context.Background(), "q")
	if err == nil || !strings.Contains(err.Error(), "purged less than 60 s ago") || !strings.Contains(err.Error(), "run the purge again in a minute") {
		t.Fatalf("purge: %v", err)
	}
}

func TestAWSQueuesUnreachable(t *testing.T) {
	awsEnv(t)
	p := &AWS{target: Target{Kind: "aws", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p.sdk.load = func(ctx context.Context) (awssdk.Config, error) {
		cfg, err := AWSConfig(ctx, p.target, p.target.Region)
		cfg.RetryMaxAttempts = 1
		return cfg, err
	}
	_, err := p.ListQueues(ctx, "", 10)
	if err == nil || !strings.Contains(err.Error(), "cannot reach SQS in eu-west-1 at http://127.0.0.1:9") {
		t.Fatalf("list: %v", err)
	}
}

// FuzzQueueInfo: SQS's attributes, whatever they hold, map without a
// panic, and a RedrivePolicy with a number or a string max receives
// names its DLQ by the ARN's last part.
func FuzzQueueInfo(f *testing.F) {
	f.Add(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:mailer-dlq","maxReceiveCount":"5"}`, "3", "1732190000")
	f.Add(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:d","maxReceiveCount":7}`, "x", "")
	f.Add(`{"maxReceiveCount":1e400}`, "-1", "99999999999999999999")
	f.Add(`not json`, "", "0")
	f.Fuzz(func(t *testing.T, redrive, visible, created string) {
		q, err := queueInfo("q", map[string]string{"RedrivePolicy": redrive, "ApproximateNumberOfMessages": visible, "CreatedTimestamp": created})
		if q.Name != "q" {
			t.Fatalf("name %q", q.Name)
		}
		var p struct {
			DeadLetterTargetArn string      `json:"deadLetterTargetArn"`
			MaxReceiveCount     json.Number `json:"maxReceiveCount"`
		}
		if redrive != "" && json.Unmarshal([]byte(redrive), &p) == nil {
			if err != nil {
				t.Fatalf("valid JSON %q refused: %v", redrive, err)
			}
			if want := queueName(p.DeadLetterTargetArn); q.DeadLetterQueue != want {
				t.Fatalf("dlq %q, want %q", q.DeadLetterQueue, want)
			}
		}
	})
}

// Without credentials, a queue command says so (the credentials step),
// not that SQS refused it.
func TestAWSQueuesWithoutCredentials(t *testing.T) {
	awsEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	p := &AWS{target: Target{Kind: "aws", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9"}}
	_, err := p.GetQueue(context.Background(), "q")
	var ce *CredentialsError
	if !errors.As(err, &ce) || ce.Step != StepCredentials || strings.Contains(err.Error(), "SQS") {
		t.Fatalf("%T %v", err, err)
	}
}
