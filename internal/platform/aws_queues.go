package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
)

// The queue commands of an aws profile act on SQS directly, with the
// profile's credentials (docs/sqs.md, "On an aws profile"): target teams
// own their queues on AWS.

// SQSMaxMessageSize is the MaximumMessageSize of a queue `queue create`
// makes on SQS: SQS's largest, since a delivered command weighs a little
// over 256 KiB at the ingress's limit (docs/store/aws.md).
const SQSMaxMessageSize = 1 << 20

// sqsMaxListPages bounds the ListQueues pages one list reads (1000 URLs
// a page).
const sqsMaxListPages = 100

// sqsListWorkers bounds the concurrent GetQueueAttributes of a list.
const sqsListWorkers = 8

// awsSDK is an aws platform's SDK configuration and clients, built on
// first use so that a command that calls nothing loads nothing.
type awsSDK struct {
	// load replaces AWSConfig (tests).
	load func(ctx context.Context) (awssdk.Config, error)

	once sync.Once
	cfg  awssdk.Config
	sqs  *sqs.Client
	err  error

	mu   sync.Mutex
	urls map[string]string // queue name -> URL
}

// sqsClient returns the SQS client, loading the configuration (role_arn
// assumed) on first use.
func (c *AWS) sqsClient(ctx context.Context) (*sqs.Client, error) {
	c.sdk.once.Do(func() {
		load := c.sdk.load
		if load == nil {
			load = func(ctx context.Context) (awssdk.Config, error) { return AWSConfig(ctx, c.target, c.target.Region) }
		}
		c.sdk.cfg, c.sdk.err = load(ctx)
		if c.sdk.err == nil {
			c.sdk.sqs = sqs.NewFromConfig(c.sdk.cfg, func(o *sqs.Options) {
				if c.target.Endpoint != "" {
					o.BaseEndpoint = awssdk.String(c.target.Endpoint)
				}
			})
		}
	})
	return c.sdk.sqs, c.sdk.err
}

// queueURL resolves a queue's URL with GetQueueUrl, once per name.
func (c *AWS) queueURL(ctx context.Context, name string) (*sqs.Client, string, error) {
	cl, err := c.sqsClient(ctx)
	if err != nil {
		return nil, "", err
	}
	c.sdk.mu.Lock()
	u, ok := c.sdk.urls[name]
	c.sdk.mu.Unlock()
	if ok {
		return cl, u, nil
	}
	out, err := cl.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
	if err != nil {
		return nil, "", c.sqsErr(ctx, "GetQueueUrl", name, err)
	}
	u = awssdk.ToString(out.QueueUrl)
	c.sdk.mu.Lock()
	if c.sdk.urls == nil {
		c.sdk.urls = map[string]string{}
	}
	c.sdk.urls[name] = u
	c.sdk.mu.Unlock()
	return cl, u, nil
}

// sqsWhere names SQS in the profile's region (and endpoint, when set).
func (c *AWS) sqsWhere() string {
	w := "SQS in " + firstNonEmpty(c.target.Region, "the configured region")
	if c.target.Endpoint != "" {
		w += " at " + c.target.Endpoint
	}
	return w
}

// sqsErr turns an SQS error into one line that names the queue and the
// fix; the SDK's error stays wrapped for -v.
func (c *AWS) sqsErr(ctx context.Context, op, queue string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return &Error{Msg: fmt.Sprintf("cannot reach %s (%v): check the network, the region and --endpoint-url", c.sqsWhere(), opErr.Err), Err: err}
	}
	switch sqsCode(err) {
	case "QueueDoesNotExist":
		return &Error{Msg: fmt.Sprintf("queue %s does not exist in %s (or your credentials cannot see it): see what exists with `snavio queue list`", queue, c.sqsWhere()), Err: err}
	case "PurgeQueueInProgress":
		return &Error{Msg: fmt.Sprintf("queue %s was purged less than 60 s ago: SQS allows one purge of a queue every 60 s; run the purge again in a minute", queue), Err: err}
	case "QueueDeletedRecently":
		return &Error{Msg: fmt.Sprintf("queue %s was deleted less than 60 s ago: SQS refuses to create it again until then; run the create again in a minute", queue), Err: err}
	case "QueueNameExists":
		return &Error{Msg: fmt.Sprintf("queue %s exists with other settings: SQS changes no queue on create; compare with `snavio queue get %s`, or pick another name", queue, queue), Err: err}
	}
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return ce
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case strings.Contains(code, "AccessDenied"):
			return &Error{Msg: fmt.Sprintf("%s refused %s on queue %s (%s): the profile's credentials lack sqs:%s on it; check them with `snavio doctor`, or ask the queue's owner for access", c.sqsWhere(), op, queue, code, op), Err: err}
		case code == "InvalidClientTokenId" || code == "UnrecognizedClientException" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidSecurity":
			return &Error{Msg: fmt.Sprintf("%s refused the credentials (%s): %s; check them with `snavio doctor`", c.sqsWhere(), code, strings.TrimSpace(api.ErrorMessage())), Err: err}
		}
		return &Error{Msg: fmt.Sprintf("%s refused %s on queue %s: %s: %s", c.sqsWhere(), op, queue, code, strings.TrimSpace(api.ErrorMessage())), Err: err}
	}
	return &Error{Msg: fmt.Sprintf("%s on queue %s (%s) failed: %v", op, queue, c.sqsWhere(), err), Err: err}
}

// sqsCode is the SQS error of err by its JSON name, whichever of the
// JSON or the query protocol's codes the service answered.
func sqsCode(err error) string {
	var (
		notFound   *sqstypes.QueueDoesNotExist
		inProgress *sqstypes.PurgeQueueInProgress
		recent     *sqstypes.QueueDeletedRecently
		exists     *sqstypes.QueueNameExists
		api        smithy.APIError
	)
	switch {
	case errors.As(err, &notFound):
		return "QueueDoesNotExist"
	case errors.As(err, &inProgress):
		return "PurgeQueueInProgress"
	case errors.As(err, &recent):
		return "QueueDeletedRecently"
	case errors.As(err, &exists):
		return "QueueNameExists"
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue":
			return "QueueDoesNotExist"
		case "AWS.SimpleQueueService.PurgeQueueInProgress":
			return "PurgeQueueInProgress"
		case "AWS.SimpleQueueService.QueueDeletedRecently":
			return "QueueDeletedRecently"
		case "QueueAlreadyExists":
			return "QueueNameExists"
		}
		return api.ErrorCode()
	}
	return ""
}

// reserved reports a queue of the platform itself: the env's escalation
// queue, the fast-to-slow hand-off, like the local dispatcher's own queue.
func (c *AWS) reserved(name string) bool {
	return c.target.Env != "" && name == (stack.Names{Env: c.target.Env}).Queue("escalation")
}

func (c *AWS) refuseReserved(name string) error {
	if c.reserved(name) {
		return &Error{Msg: fmt.Sprintf("queue %s is the platform's own hand-off (reserved): receiving, deleting or purging its messages would take or lose commands in flight", name)}
	}
	return nil
}

// queueName is the last path segment of a queue URL or ARN.
func queueName(s string) string {
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ListQueues implements Platform: ListQueuesPrefix with no prefix.
func (c *AWS) ListQueues(ctx context.Context, after string, limit int) (wire.QueueList, error) {
	return c.ListQueuesPrefix(ctx, "", after, limit)
}

// ListQueuesPrefix lists the queues whose names start with prefix (SQS's
// QueueNamePrefix), in name order, from the first name above after: up
// to limit of them, each with its attributes. SQS lists in no order, so
// every page of names is read first.
func (c *AWS) ListQueuesPrefix(ctx context.Context, prefix, after string, limit int) (wire.QueueList, error) {
	if limit <= 0 || limit > wire.QueueMaxPage {
		limit = wire.QueueMaxPage
	}
	cl, err := c.sqsClient(ctx)
	if err != nil {
		return wire.QueueList{}, err
	}
	in := &sqs.ListQueuesInput{MaxResults: awssdk.Int32(1000)}
	if prefix != "" {
		in.QueueNamePrefix = awssdk.String(prefix)
	}
	var names []string
	for page := 0; ; page++ {
		if page == sqsMaxListPages {
			return wire.QueueList{}, &Error{Msg: fmt.Sprintf("%s lists more than %d queues: narrow the list with --prefix", c.sqsWhere(), sqsMaxListPages*1000)}
		}
		out, err := cl.ListQueues(ctx, in)
		if err != nil {
			return wire.QueueList{}, c.sqsErr(ctx, "ListQueues", prefix+"*", err)
		}
		for _, u := range out.QueueUrls {
			if n := queueName(u); n > after && strings.HasPrefix(n, prefix) {
				names = append(names, n)
				c.sdk.mu.Lock()
				if c.sdk.urls == nil {
					c.sdk.urls = map[string]string{}
				}
				c.sdk.urls[n] = u
				c.sdk.mu.Unlock()
			}
		}
		if awssdk.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	sort.Strings(names)
	var res wire.QueueList
	if len(names) > limit {
		names = names[:limit]
		next := names[limit-1]
		res.Next = &next
	}
	res.Queues = make([]wire.QueueInfo, len(names))
	errs := make([]error, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(sqsListWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				res.Queues[i], errs[i] = c.GetQueue(ctx, names[i])
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	// A queue deleted since ListQueues is left out; any other failure
	// fails the list with the first one.
	kept := res.Queues[:0]
	for i, err := range errs {
		switch {
		case err == nil:
			kept = append(kept, res.Queues[i])
		case sqsCode(errors.Unwrap(err)) != "QueueDoesNotExist":
			return wire.QueueList{}, err
		}
	}
	res.Queues = kept
	return res, nil
}

// queueAttributes reads every attribute of a queue.
func (c *AWS) queueAttributes(ctx context.Context, name string) (map[string]string, error) {
	cl, u, err := c.queueURL(ctx, name)
	if err != nil {
		return nil, err
	}
	out, err := cl.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(u), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		return nil, c.sqsErr(ctx, "GetQueueAttributes", name, err)
	}
	return out.Attributes, nil
}

// GetQueue implements Platform: GetQueueAttributes of the queue. SQS has
// no oldest-message age in its API (it is a CloudWatch metric) and no
// depth limit, so OldestAgeSeconds and MaxDepth stay 0.
func (c *AWS) GetQueue(ctx context.Context, name string) (wire.QueueInfo, error) {
	a, err := c.queueAttributes(ctx, name)
	if err != nil {
		return wire.QueueInfo{}, err
	}
	q, err := queueInfo(name, a)
	q.Reserved = c.reserved(name)
	return q, err
}

// queueInfo maps SQS's queue attributes to a QueueInfo.
func queueInfo(name string, a map[string]string) (wire.QueueInfo, error) {
	q := wire.QueueInfo{Name: name, ARN: a["QueueArn"]}
	num := func(key string) int {
		n, _ := strconv.Atoi(a[key])
		return n
	}
	q.Visible = num("ApproximateNumberOfMessages")
	q.InFlight = num("ApproximateNumberOfMessagesNotVisible")
	q.VisibilityTimeoutSeconds = float64(num("VisibilityTimeout"))
	if ts := num("CreatedTimestamp"); ts > 0 {
		q.CreatedAt = time.Unix(int64(ts), 0).UTC()
	}
	if rp := a["RedrivePolicy"]; rp != "" {
		var p struct {
			DeadLetterTargetArn string      `json:"deadLetterTargetArn"`
			MaxReceiveCount     json.Number `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(rp), &p); err != nil {
			return q, fmt.Errorf("queue %s: SQS answered a RedrivePolicy that is not JSON (%.80q): %w", name, rp, err)
		}
		q.DeadLetterQueue = queueName(p.DeadLetterTargetArn)
		mr, _ := p.MaxReceiveCount.Int64()
		q.MaxReceives = int(mr)
	}
	return q, nil
}

// CreateQueue implements Platform: CreateQueue with SQS-managed
// encryption, SQS's largest message size and, with a DLQ, its
// RedrivePolicy. SQS answers an existing queue of the same settings with
// its URL (created false here) and refuses one of other settings.
func (c *AWS) CreateQueue(ctx context.Context, req wire.QueueCreateRequest) (wire.QueueCreateResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return wire.QueueCreateResult{}, err
	}
	if req.MaxDepth != 0 {
		return wire.QueueCreateResult{}, fmt.Errorf("max depth %d: an SQS queue has no depth limit; leave it out on an aws profile", req.MaxDepth)
	}
	cl, err := c.sqsClient(ctx)
	if err != nil {
		return wire.QueueCreateResult{}, err
	}
	attrs := map[string]string{
		string(sqstypes.QueueAttributeNameSqsManagedSseEnabled): "true",
		string(sqstypes.QueueAttributeNameMaximumMessageSize):   strconv.Itoa(SQSMaxMessageSize),
	}
	if req.VisibilityTimeoutSeconds > 0 {
		attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(req.VisibilityTimeoutSeconds)
	}
	if req.DeadLetterQueue != "" {
		da, err := c.queueAttributes(ctx, req.DeadLetterQueue)
		if err != nil {
			return wire.QueueCreateResult{}, err
		}
		if da["QueueArn"] == "" {
			return wire.QueueCreateResult{}, &Error{Msg: fmt.Sprintf("%s answered no QueueArn for dead-letter queue %s", c.sqsWhere(), req.DeadLetterQueue)}
		}
		rp, _ := json.Marshal(map[string]string{"deadLetterTargetArn": da["QueueArn"], "maxReceiveCount": strconv.Itoa(req.MaxReceives)})
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = string(rp)
	}
	_, _, err = c.queueURL(ctx, req.Name)
	if err != nil && sqsCode(errors.Unwrap(err)) != "QueueDoesNotExist" {
		return wire.QueueCreateResult{}, err
	}
	created := err != nil
	out, err := cl.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(req.Name), Attributes: attrs})
	if err != nil {
		return wire.QueueCreateResult{}, c.sqsErr(ctx, "CreateQueue", req.Name, err)
	}
	c.sdk.mu.Lock()
	if c.sdk.urls == nil {
		c.sdk.urls = map[string]string{}
	}
	c.sdk.urls[req.Name] = awssdk.ToString(out.QueueUrl)
	c.sdk.mu.Unlock()
	info, err := c.GetQueue(ctx, req.Name)
	if err != nil {
		return wire.QueueCreateResult{}, err
	}
	return wire.QueueCreateResult{Created: created, QueueInfo: info}, nil
}

// ReceiveMessages implements Platform: one ReceiveMessage with every
// system and message attribute.
func (c *AWS) ReceiveMessages(ctx context.Context, queue string, req wire.QueueReceiveRequest) (wire.QueueReceived, error) {
	if err := c.refuseReserved(queue); err != nil {
		return wire.QueueReceived{}, err
	}
	cl, u, err := c.queueURL(ctx, queue)
	if err != nil {
		return wire.QueueReceived{}, err
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    awssdk.String(u),
		MaxNumberOfMessages:         int32(max(req.Max, 1)),
		WaitTimeSeconds:             int32(req.WaitSeconds),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	if req.VisibilityTimeoutSeconds > 0 {
		in.VisibilityTimeout = int32(req.VisibilityTimeoutSeconds)
	}
	out, err := cl.ReceiveMessage(ctx, in)
	if err != nil {
		return wire.QueueReceived{}, c.sqsErr(ctx, "ReceiveMessage", queue, err)
	}
	res := wire.QueueReceived{Queue: queue, Messages: make([]wire.QueueMessage, 0, len(out.Messages))}
	for _, m := range out.Messages {
		res.Messages = append(res.Messages, queueMessage(m))
	}
	return res, nil
}

// queueMessage maps an SQS message: its message attributes (Binary ones
// as "base64:..."), and its send time and receive count from the system
// attributes.
func queueMessage(m sqstypes.Message) wire.QueueMessage {
	// SQS bodies are Unicode text: always utf-8 here.
	out := wire.QueueMessage{ID: awssdk.ToString(m.MessageId), Body: awssdk.ToString(m.Body), BodyEncoding: "utf-8", ReceiptHandle: awssdk.ToString(m.ReceiptHandle)}
	ms := func(key string) time.Time {
		n, err := strconv.ParseInt(m.Attributes[key], 10, 64)
		if err != nil || n <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	out.SentAt = ms(string(sqstypes.MessageSystemAttributeNameSentTimestamp))
	out.FirstReceivedAt = ms(string(sqstypes.MessageSystemAttributeNameApproximateFirstReceiveTimestamp))
	out.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	if len(m.MessageAttributes) > 0 {
		out.Attributes = make(map[string]string, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			if v.StringValue != nil {
				out.Attributes[k] = *v.StringValue
			} else {
				out.Attributes[k] = "base64:" + base64.StdEncoding.EncodeToString(v.BinaryValue)
			}
		}
	}
	return out
}

// DeleteMessages implements Platform: one DeleteMessageBatch, each
// handle's outcome in request order. SQS's ReceiptHandleIsInvalid is
// invalid_receipt, as locally; other codes are SQS's own.
func (c *AWS) DeleteMessages(ctx context.Context, queue string, req wire.QueueDeleteRequest) (wire.QueueDeleteResult, error) {
	n := len(req.ReceiptHandles)
	if n == 0 || n > wire.QueueMaxDeleteBatch {
		return wire.QueueDeleteResult{}, fmt.Errorf("delete takes 1 to %d receipt handles, not %d", wire.QueueMaxDeleteBatch, n)
	}
	if err := c.refuseReserved(queue); err != nil {
		return wire.QueueDeleteResult{}, err
	}
	cl, u, err := c.queueURL(ctx, queue)
	if err != nil {
		return wire.QueueDeleteResult{}, err
	}
	in := &sqs.DeleteMessageBatchInput{QueueUrl: awssdk.String(u), Entries: make([]sqstypes.DeleteMessageBatchRequestEntry, n)}
	for i, h := range req.ReceiptHandles {
		in.Entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: awssdk.String(strconv.Itoa(i)), ReceiptHandle: awssdk.String(h)}
	}
	out, err := cl.DeleteMessageBatch(ctx, in)
	if err != nil {
		return wire.QueueDeleteResult{}, c.sqsErr(ctx, "DeleteMessageBatch", queue, err)
	}
	res := wire.QueueDeleteResult{Queue: queue, Results: make([]wire.QueueDeleteOutcome, n)}
	for i, h := range req.ReceiptHandles {
		res.Results[i] = wire.QueueDeleteOutcome{ReceiptHandle: h, Code: "unanswered", Error: "SQS answered neither success nor failure for this handle; receive the message again to see whether it is still there"}
	}
	at := func(id *string) int {
		i, err := strconv.Atoi(awssdk.ToString(id))
		if err != nil || i < 0 || i >= n {
			return -1
		}
		return i
	}
	for _, s := range out.Successful {
		if i := at(s.Id); i >= 0 {
			res.Results[i] = wire.QueueDeleteOutcome{ReceiptHandle: req.ReceiptHandles[i], Deleted: true}
		}
	}
	for _, f := range out.Failed {
		if i := at(f.Id); i >= 0 {
			code := awssdk.ToString(f.Code)
			if code == "ReceiptHandleIsInvalid" {
				code = "invalid_receipt"
			}
			res.Results[i] = wire.QueueDeleteOutcome{ReceiptHandle: req.ReceiptHandles[i], Code: code, Error: awssdk.ToString(f.Message)}
		}
	}
	return res, nil
}

// PurgeQueue implements Platform: PurgeQueue, which SQS allows once a
// minute per queue and completes within that minute. SQS reports no
// count: Purged is its approximate count (visible, in flight and
// delayed) read just before.
func (c *AWS) PurgeQueue(ctx context.Context, queue string) (wire.QueuePurgeResult, error) {
	if err := c.refuseReserved(queue); err != nil {
		return wire.QueuePurgeResult{}, err
	}
	a, err := c.queueAttributes(ctx, queue)
	if err != nil {
		return wire.QueuePurgeResult{}, err
	}
	cl, u, err := c.queueURL(ctx, queue)
	if err != nil {
		return wire.QueuePurgeResult{}, err
	}
	if _, err := cl.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: awssdk.String(u)}); err != nil {
		return wire.QueuePurgeResult{}, c.sqsErr(ctx, "PurgeQueue", queue, err)
	}
	n := 0
	for _, k := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
		v, _ := strconv.Atoi(a[string(k)])
		n += v
	}
	return wire.QueuePurgeResult{Queue: queue, Purged: n}, nil
}
