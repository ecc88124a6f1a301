package devserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// The target-team tests run the real aws-sdk-go-v2 SQS client against a
// real `dispatch serve --demo`, signed with the demo tenant's ingress
// credentials: the demo tenant owns demo-orders and demo-orders-dlq.

func sqsClient(t *testing.T, s *Serve, k ingresscred.Key) *sqs.Client {
	t.Helper()
	return sqs.New(sqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Info().URL), RetryMaxAttempts: 1,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey}, nil
		})),
	})
}

func demoSQS(t *testing.T) (*Serve, *sqs.Client, string) {
	t.Helper()
	isolateAWSEnv(t)
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	k, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, DemoTenant), DemoTenant)
	if err != nil {
		t.Fatal(err)
	}
	return s, sqsClient(t, s, k), dir
}

func queueURL(t *testing.T, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("GetQueueUrl %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, c *sqs.Client, url, body string) string {
	t.Helper()
	out, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	return aws.ToString(out.MessageId)
}

func receive(t *testing.T, c *sqs.Client, in *sqs.ReceiveMessageInput) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(t.Context(), in)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("%s: err %v, want the error code %s", what, err, code)
	}
}

// A consumer receives with attributes, the message stays invisible until
// its visibility changes, and a delete removes it for good; a handle of
// a deleted message is ReceiptHandleIsInvalid.
func TestSQSReceiveVisibilityDelete(t *testing.T) {
	s, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	if want := s.Info().URL + "/000000000000/" + DemoQueue; url != want {
		t.Fatalf("QueueUrl = %s, want %s", url, want)
	}
	if _, err := s.Store().Send(t.Context(), DemoQueue, []byte(`{"sku":"A-1"}`), map[string]string{"snavio.tenant": "demo", "other": "x"}); err != nil {
		t.Fatal(err)
	}
	msgs := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"snavio.*"}})
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if aws.ToString(m.Body) != `{"sku":"A-1"}` || m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" {
		t.Fatalf("message = %+v", m)
	}
	if len(m.MessageAttributes) != 1 || aws.ToString(m.MessageAttributes["snavio.tenant"].StringValue) != "demo" || aws.ToString(m.MD5OfMessageAttributes) == "" {
		t.Fatalf("message attributes = %+v (want snavio.tenant only)", m.MessageAttributes)
	}
	if got := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); len(got) != 0 {
		t.Fatalf("received %d messages during the visibility timeout, want 0", len(got))
	}
	attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	a := attrs.Attributes
	if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "1" || a["VisibilityTimeout"] != "30" ||
		a["QueueArn"] != embedded.QueueARN(DemoQueue) || !strings.Contains(a["RedrivePolicy"], `"maxReceiveCount":5`) {
		t.Fatalf("attributes = %v", a)
	}
	if _, err := c.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	again := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if len(again) != 1 || again[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after ChangeMessageVisibility 0: %+v", again)
	}
	_, err = c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	var rh *types.ReceiptHandleIsInvalid
	if !errors.As(err, &rh) {
		t.Fatalf("DeleteMessage with the first receive's handle: %v, want ReceiptHandleIsInvalid", err)
	}
	if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: again[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Store().ListQueues(t.Context())
	for _, q := range st {
		if q.Name == DemoQueue && q.Visible+q.InFlight != 0 {
			t.Fatalf("queue after delete: %+v", q)
		}
	}
}

// Batch deletes and visibility changes answer per entry: good handles
// succeed, a bad one fails with its code; whole-batch errors are SQS's.
func TestSQSBatchPartialFailures(t *testing.T) {
	_, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	for i := range 4 {
		send(t, c, url, "m"+strconv.Itoa(i))
	}
	msgs := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if len(msgs) != 4 {
		t.Fatalf("received %d, want 4", len(msgs))
	}
	cv, err := c.ChangeMessageVisibilityBatch(t.Context(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("b"), ReceiptHandle: aws.String("r1.bogus.00"), VisibilityTimeout: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cv.Successful) != 1 || aws.ToString(cv.Successful[0].Id) != "a" || len(cv.Failed) != 1 ||
		aws.ToString(cv.Failed[0].Id) != "b" || aws.ToString(cv.Failed[0].Code) != "ReceiptHandleIsInvalid" || !cv.Failed[0].SenderFault {
		t.Fatalf("ChangeMessageVisibilityBatch = %+v", cv)
	}
	back := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if len(back) != 1 || aws.ToString(back[0].MessageId) != aws.ToString(msgs[0].MessageId) {
		t.Fatalf("after the visibility change, received %+v", back)
	}
	del, err := c.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("stale"), ReceiptHandle: msgs[0].ReceiptHandle},
		{Id: aws.String("fresh"), ReceiptHandle: back[0].ReceiptHandle},
		{Id: aws.String("m1"), ReceiptHandle: msgs[1].ReceiptHandle},
		{Id: aws.String("junk"), ReceiptHandle: aws.String("not-a-handle")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	for _, e := range del.Successful {
		ok[aws.ToString(e.Id)] = true
	}
	failed := map[string]string{}
	for _, e := range del.Failed {
		failed[aws.ToString(e.Id)] = aws.ToString(e.Code)
	}
	if !ok["fresh"] || !ok["m1"] || len(ok) != 2 || failed["stale"] != "ReceiptHandleIsInvalid" || failed["junk"] != "ReceiptHandleIsInvalid" {
		t.Fatalf("DeleteMessageBatch: successful %v, failed %v", ok, failed)
	}

	var many []types.DeleteMessageBatchRequestEntry
	for i := range 11 {
		many = append(many, types.DeleteMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), ReceiptHandle: msgs[2].ReceiptHandle})
	}
	_, err = c.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: many})
	var tooMany *types.TooManyEntriesInBatchRequest
	if !errors.As(err, &tooMany) || tooMany.ErrorCode() != "AWS.SimpleQueueService.TooManyEntriesInBatchRequest" {
		t.Fatalf("11 entries: %v, want TooManyEntriesInBatchRequest", err)
	}
	_, err = c.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: many[:1:1]})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ChangeMessageVisibilityBatch(t.Context(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("x"), ReceiptHandle: msgs[3].ReceiptHandle}, {Id: aws.String("x"), ReceiptHandle: msgs[3].ReceiptHandle},
	}})
	var dup *types.BatchEntryIdsNotDistinct
	if !errors.As(err, &dup) {
		t.Fatalf("repeated ids: %v, want BatchEntryIdsNotDistinct", err)
	}
}

// A long poll waiting on an empty queue returns as soon as a message
// arrives, woken by the store's change notification.
func TestSQSLongPollWakesOnSend(t *testing.T) {
	s, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	type result struct {
		msgs []types.Message
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		r := result{err: err, at: time.Now()}
		if out != nil {
			r.msgs = out.Messages
		}
		done <- r
	}()
	waitFor(t, "the ReceiveMessage to wait", func() bool {
		return strings.Contains(metricsText(t, s), `snavio_http_requests_in_flight{handler="sqs"} 1`)
	})
	sent := time.Now()
	id := send(t, c, url, "wake up")
	r := <-done
	if r.err != nil || len(r.msgs) != 1 || aws.ToString(r.msgs[0].MessageId) != id {
		t.Fatalf("long poll = %+v, %v", r.msgs, r.err)
	}
	t.Logf("long poll returned %v after the send", r.at.Sub(sent))
	if d := r.at.Sub(sent); d > 5*time.Second {
		t.Fatalf("long poll returned %v after the send", d)
	}
}

func metricsText(t *testing.T, s *Serve) string {
	t.Helper()
	resp, err := http.Get(s.Info().URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A message received MaxReceives times moves to the dead-letter queue;
// the team reads it there and redrives it with SendMessage.
func TestSQSDeadLetterAndRedrive(t *testing.T) {
	_, c, _ := demoSQS(t)
	url, dlq := queueURL(t, c, DemoQueue), queueURL(t, c, DemoDLQ)
	id := send(t, c, url, `{"poison":true}`)
	for i := 1; i <= 5; i++ {
		got := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if len(got) != 1 || got[0].Attributes["ApproximateReceiveCount"] != strconv.Itoa(i) {
			t.Fatalf("receive %d: %+v", i, got)
		}
		// The consumer fails and gives the message back at once.
		if _, err := c.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: got[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); len(got) != 0 {
		t.Fatalf("receive 6 returned %d messages; the message should have moved to the DLQ", len(got))
	}
	dead := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameDeadLetterQueueSourceArn}})
	if len(dead) != 1 || aws.ToString(dead[0].MessageId) != id || dead[0].Attributes["DeadLetterQueueSourceArn"] != embedded.QueueARN(DemoQueue) ||
		aws.ToString(dead[0].MessageAttributes[localqueue.AttrDLQReason].StringValue) != localqueue.DLQReasonMaxReceives {
		t.Fatalf("DLQ message = %+v", dead)
	}
	attrs := map[string]types.MessageAttributeValue{"redriven": {DataType: aws.String("Number"), StringValue: aws.String("1")}}
	out, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: dead[0].Body, MessageAttributes: attrs})
	if err != nil || aws.ToString(out.MD5OfMessageAttributes) == "" {
		t.Fatalf("redrive SendMessage: %+v %v", out, err)
	}
	if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: dead[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	back := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageAttributeNames: []string{"redriven"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if len(back) != 1 || aws.ToString(back[0].Body) != `{"poison":true}` || back[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("redriven message = %+v", back)
	}
}

// Bad input gets SQS's error codes, as the SDK maps them.
func TestSQSErrors(t *testing.T) {
	s, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	_, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("demo-nope")})
	var qne *types.QueueDoesNotExist
	if !errors.As(err, &qne) || qne.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("GetQueueUrl of a missing queue: %v", err)
	}
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.Info().URL + "/000000000000/demo-gone")})
	if !errors.As(err, &qne) {
		t.Fatalf("ReceiveMessage of a missing queue: %v", err)
	}
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11})
	wantCode(t, "MaxNumberOfMessages 11", err, "InvalidParameterValue")
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 21})
	wantCode(t, "WaitTimeSeconds 21", err, "InvalidParameterValue")
	_, err = c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("bogus")})
	var rh *types.ReceiptHandleIsInvalid
	if !errors.As(err, &rh) {
		t.Fatalf("DeleteMessage bogus: %v", err)
	}
	_, err = c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), DelaySeconds: 5})
	wantCode(t, "DelaySeconds 5", err, "InvalidParameterValue")
	_, err = c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("bad \x01 char")})
	var imc *types.InvalidMessageContents
	if !errors.As(err, &imc) {
		t.Fatalf("a control character in the body: %v", err)
	}
	_, err = c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"Colour"}})
	var ian *types.InvalidAttributeName
	if !errors.As(err, &ian) {
		t.Fatalf("an unknown attribute: %v", err)
	}
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String("http://x/123456789012/" + DemoQueue)})
	var ia *types.InvalidAddress
	if !errors.As(err, &ia) {
		t.Fatalf("a foreign account's queue URL: %v", err)
	}
	// A body that is not JSON and an action not served.
	for _, tc := range []struct{ target, body, code string }{
		{"AmazonSQS.ReceiveMessage", `[1]`, "InvalidParameterValue"},
		{"AmazonSQS.ReceiveMessage", `{}`, "MissingParameter"},
		// 18446744074 s overflows a time.Duration to 0.29 s.
		{"AmazonSQS.ReceiveMessage", `{"QueueUrl":"` + url + `","VisibilityTimeout":18446744074}`, "InvalidParameterValue"},
		{"AmazonSQS.ChangeMessageVisibility", `{"QueueUrl":"` + url + `","ReceiptHandle":"r1.x.00","VisibilityTimeout":18446744074}`, "InvalidParameterValue"},
		{"AmazonSQS.DeleteQueue", `{}`, "InvalidAction"},
	} {
		if got := rawSQS(t, s, tc.target, tc.body); !strings.Contains(got, tc.code) {
			t.Fatalf("%s %s: %s, want %s", tc.target, tc.body, got, tc.code)
		}
	}
}

// rawSQS sends a signed SQS request as built by hand and returns the
// X-Amzn-Query-Error header and the body.
func rawSQS(t *testing.T, s *Serve, target, body string) string {
	t.Helper()
	k, err := ingresscred.ReadFile(ingresscred.DefaultFile(s.o.DataDir, DemoTenant), DemoTenant)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.Info().URL+"/", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(t.Context(), aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get("X-Amzn-Query-Error") + " " + string(b)
}

// A tenant's credential works on its own queues only: another tenant's
// is refused with AccessDenied and does not see them in ListQueues.
func TestSQSTenantScope(t *testing.T) {
	s, demo, _ := demoSQS(t)
	if _, err := s.Store().CreateQueue(t.Context(), localqueue.QueueConfig{Name: "other-jobs"}); err != nil {
		t.Fatal(err)
	}
	cred, err := s.Credentials().Create("other")
	if err != nil {
		t.Fatal(err)
	}
	other := sqsClient(t, s, ingresscred.Key{AccessKeyID: cred.AccessKeyID, SecretAccessKey: cred.Secret})
	_, err = other.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(DemoQueue)})
	wantCode(t, "other's GetQueueUrl of demo-orders", err, "AccessDenied")
	_, err = other.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.Info().URL + "/000000000000/" + DemoQueue)})
	wantCode(t, "other's ReceiveMessage of demo-orders", err, "AccessDenied")
	_, err = other.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(HandoffQueue)})
	wantCode(t, "the dispatcher's hand-off queue", err, "AccessDenied")
	waitFor(t, "the refusal on _platform", func() bool {
		recs, err := s.store.ReadTelemetry(context.Background(), "_platform", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if b, _ := json.Marshal(r); bytes.Contains(b, []byte("sqs_access_denied\"")) {
				return true
			}
		}
		return false
	})
	list, err := other.ListQueues(t.Context(), &sqs.ListQueuesInput{})
	if err != nil || len(list.QueueUrls) != 1 || !strings.HasSuffix(list.QueueUrls[0], "/other-jobs") {
		t.Fatalf("other's ListQueues = %+v, %v", list, err)
	}
	list, err = demo.ListQueues(t.Context(), &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
	if err != nil || len(list.QueueUrls) != 1 || !strings.HasSuffix(list.QueueUrls[0], "/"+DemoQueue) || aws.ToString(list.NextToken) == "" {
		t.Fatalf("demo's first ListQueues page = %+v, %v", list, err)
	}
	list, err = demo.ListQueues(t.Context(), &sqs.ListQueuesInput{MaxResults: aws.Int32(1), NextToken: list.NextToken})
	if err != nil || len(list.QueueUrls) != 1 || !strings.HasSuffix(list.QueueUrls[0], "/"+DemoDLQ) {
		t.Fatalf("demo's second ListQueues page = %+v, %v", list, err)
	}
	// A signature scoped to another service is refused.
	k, _ := ingresscred.ReadFile(ingresscred.DefaultFile(s.o.DataDir, DemoTenant), DemoTenant)
	req, _ := http.NewRequest(http.MethodPost, s.Info().URL+"/", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	if err := ingresscred.Sign(req, []byte(`{}`), k, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "InvalidSignatureException") {
		t.Fatalf("a signature for service events: %d %s", resp.StatusCode, b)
	}
}

// The AWS CLI's `aws sqs receive-message --endpoint-url` reads a local
// queue with the tenant's credentials file. In CI (CI=true) a missing aws
// fails the test.
func TestAWSCLIReceiveMessage(t *testing.T) {
	awsBin, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the AWS CLI (aws) is not on PATH; .ci/run installs Debian's awscli")
		}
		t.Skip("the AWS CLI (aws) is not on PATH; install awscli to run this test")
	}
	s, c, dir := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	id := send(t, c, url, `{"from":"the sdk"}`)
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), awsBin, append([]string{"sqs", "--endpoint-url", s.Info().URL, "--region", "us-east-1", "--output", "json"}, args...)...)
		cmd.Env = append(os.Environ(), "AWS_SHARED_CREDENTIALS_FILE="+ingresscred.DefaultFile(dir, DemoTenant))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := run("receive-message", "--queue-url", url, "--attribute-names", "All", "--wait-time-seconds", "1")
	if err != nil {
		t.Fatalf("aws sqs receive-message: %v\n%s", err, out)
	}
	var res struct {
		Messages []struct {
			MessageId, ReceiptHandle, Body string
			Attributes                     map[string]string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Messages) != 1 || res.Messages[0].MessageId != id || res.Messages[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("aws sqs receive-message answered %s (%v)", out, err)
	}
	if out, err := run("delete-message", "--queue-url", url, "--receipt-handle", res.Messages[0].ReceiptHandle); err != nil {
		t.Fatalf("aws sqs delete-message: %v\n%s", err, out)
	}
	out, err = run("get-queue-url", "--queue-name", "demo-nope")
	if err == nil || !strings.Contains(out, "NonExistentQueue") {
		t.Fatalf("aws sqs get-queue-url of a missing queue: %v\n%s", err, out)
	}
}

// BenchmarkSQSReceiveDelete measures a consumer's loop through the SDK on
// loopback: ReceiveMessage of one waiting message, then DeleteMessage
// (the SendMessage that fills the queue is outside the timer).
func BenchmarkSQSReceiveDelete(b *testing.B) {
	dir := b.TempDir()
	s, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	k, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, DemoTenant), DemoTenant)
	if err != nil {
		b.Fatal(err)
	}
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Info().URL),
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey}, nil
		}))})
	url := aws.String(s.Info().URL + "/000000000000/" + DemoQueue)
	ctx := context.Background()
	var recv time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(`{"sku":"A-1"}`)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
		if err != nil || len(out.Messages) != 1 {
			b.Fatalf("ReceiveMessage: %v, %d messages", err, len(out.Messages))
		}
		recv += time.Since(start)
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(recv.Microseconds())/float64(b.N), "receive-µs/op")
}

// ReceiveMessage's VisibilityTimeout overrides the queue's: 0 leaves the
// message visible at once (the SDK leaves a zero out, so the request is
// built by hand, as the AWS CLI's --visibility-timeout 0 sends it).
func TestSQSReceiveVisibilityTimeoutZero(t *testing.T) {
	s, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	id := send(t, c, url, "again")
	got := rawSQS(t, s, "AmazonSQS.ReceiveMessage", `{"QueueUrl":"`+url+`","VisibilityTimeout":0}`)
	if !strings.Contains(got, id) {
		t.Fatalf("ReceiveMessage with VisibilityTimeout 0: %s", got)
	}
	again := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), VisibilityTimeout: 60,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if len(again) != 1 || again[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("the second receive: %+v", again)
	}
	if got := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); len(got) != 0 {
		t.Fatalf("received %d during the 60 s visibility timeout", len(got))
	}
}

// At most 8 long polls wait at once (the queue API's bound, shared): the
// ninth is RequestThrottled, which SDKs retry; a receive that need not
// wait is still served.
func TestSQSLongPollBound(t *testing.T) {
	s, c, _ := demoSQS(t)
	url := queueURL(t, c, DemoQueue)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
			done <- err
		}()
	}
	// In flight is not yet waiting: a receive holds its place only once
	// its first check found nothing.
	waitFor(t, "8 waiting receives", func() bool { return s.queues.Waiting() == 8 })
	_, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
	wantCode(t, "a ninth long poll", err, "RequestThrottled")
	if got := receive(t, c, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); len(got) != 0 {
		t.Fatalf("a short receive of an empty queue: %d messages", len(got))
	}
	cancel()
	for range 8 {
		<-done
	}
}
