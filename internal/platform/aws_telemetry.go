package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/policy"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// A tail on an aws profile reads a temporary SQS queue of its own,
// subscribed to the tenant's telemetry topic, never the tenant's own
// queue (docs/aws-cli.md). Its conventions:
const (
	// TagTail marks a temporary queue and names its owner
	// (user@host pid N). A queue without it is never swept.
	TagTail = "snavio:tail"
	// TagTailCreated and TagTailAlive are RFC 3339 times: when the queue
	// was made, and when its tail last said it was running.
	TagTailCreated = "snavio:tail-created"
	TagTailAlive   = "snavio:tail-alive"
	// TagTailSubscription is the queue's subscription ARN, unsubscribed
	// with it.
	TagTailSubscription = "snavio:tail-subscription"
	// TagTailTenant is the tenant whose topic the queue is subscribed to.
	TagTailTenant = "snavio:tail-tenant"

	// DefaultTailStaleAfter is how long a temporary queue may go without
	// a refresh of TagTailAlive before another tail sweeps it.
	DefaultTailStaleAfter = 30 * time.Minute
	// tailAliveEvery is how often a running tail refreshes TagTailAlive.
	tailAliveEvery = 5 * time.Minute
	// tailRetention bounds what a crashed tail's queue keeps (seconds).
	tailRetention = 3600
	// DefaultReorderWindow is how long an event waits for the events
	// before it (SNS does not keep order) before they count as a gap.
	DefaultReorderWindow = 2 * time.Second
	// maxTelemetryMessage is SNS's largest message.
	maxTelemetryMessage = 256 << 10
	// sqsMaxWait is ReceiveMessage's longest long poll.
	sqsMaxWait = 20 * time.Second
)

// Message attributes the outbox publishes with every telemetry event
// (awsstore.AttrEvent, AttrTenant, AttrSeq; docs/store/aws.md).
const (
	attrEvent  = "snavio.event"
	attrTenant = "snavio.tenant"
	attrSeq    = "snavio.seq"
)

// AWSTelemetryOptions tune OpenAWSTelemetry. The zero value is the
// production setting.
type AWSTelemetryOptions struct {
	// Clock times the reorder window and the queue's tags.
	Clock clock.Clock
	// Owner is the TagTail value (default user@host pid N).
	Owner string
	// StaleAfter is DefaultTailStaleAfter when zero.
	StaleAfter time.Duration
	// Reorder is DefaultReorderWindow when zero.
	Reorder time.Duration
	// Unordered hands events over as they arrive, without the reorder
	// window (send --wait, which looks for one command's outcome).
	// Redeliveries are still dropped.
	Unordered bool
	// Notice receives what the reader drops or cannot do without failing
	// (a rejected message, a late event, a failed sweep). Nil: dropped.
	Notice func(msg string)
	// HTTPClient and APIOptions are given to the SQS and SNS clients
	// (tests: a recorder, awstest.Calls).
	HTTPClient *http.Client
	APIOptions []func(*middleware.Stack) error
}

// TelemetryStats counts what a reader dropped.
type TelemetryStats struct {
	// Rejected messages failed validation (DecodeTelemetryMessage).
	Rejected int
	// Redelivered events were handed over already (SNS and SQS deliver
	// at least once).
	Redelivered int
	// Late events arrived after the reader gave up waiting for them and
	// reported them as a gap.
	Late int
}

// AWSTelemetry reads one tenant's telemetry through a temporary queue
// subscribed to its topic. ReadTelemetry has Platform.ReadTelemetry's
// shape (for tail's Follower and send --wait); Close removes the queue.
// It is not safe for concurrent use.
type AWSTelemetry struct {
	sqs      *sqs.Client
	sns      *sns.Client
	tenant   string
	topicARN string
	// prefix starts the names of the tenant's temporary queues
	// (stack.Names.TailQueuePrefix), which its control role may manage.
	prefix   string
	queueURL string
	queue    string
	subARN   string
	clock    clock.Clock
	opts     AWSTelemetryOptions
	order    reorder
	alive    time.Time
	stats    TelemetryStats
	closed   bool
	// Swept are the stale queues this reader removed when it opened.
	Swept []string
}

// OpenAWSTelemetry sweeps stale temporary queues, then makes one for
// tenant: created, restricted to the topic, subscribed with raw message
// delivery, tagged. Events published from then on can be read; the
// tenant's own queue is not touched.
func OpenAWSTelemetry(ctx context.Context, t Target, tenant string, o AWSTelemetryOptions) (*AWSTelemetry, error) {
	if !telemetry.ValidStream(tenant) {
		return nil, fmt.Errorf("tenant %.80q: give %s", tenant, telemetry.StreamRule)
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultTailStaleAfter
	}
	if o.Reorder <= 0 {
		o.Reorder = DefaultReorderWindow
	}
	if o.Owner == "" {
		o.Owner = DefaultTailOwner()
	}
	role, err := EmitRoleOf(t)
	if err != nil {
		return nil, fmt.Errorf("finding tenant %s's telemetry topic: %w", tenant, err)
	}
	cfg, err := AWSConfig(ctx, t, t.Region)
	if err != nil {
		return nil, err
	}
	topicARN, err := role.TopicARN(cfg.Region, tenant)
	if err != nil {
		return nil, err
	}
	prefix, err := stack.Names{Env: role.Env}.TailQueuePrefix(tenant)
	if err != nil {
		return nil, err
	}
	if err := callerCredentials(ctx, cfg, t); err != nil {
		return nil, err
	}
	if o.HTTPClient != nil {
		cfg.HTTPClient = o.HTTPClient
	}
	a := &AWSTelemetry{tenant: tenant, topicARN: topicARN, prefix: prefix, clock: o.Clock, opts: o, order: reorder{window: o.Reorder, held: map[uint64]held{}}}
	if o.Unordered {
		a.order.seen = map[uint64]bool{}
	}
	a.sqs = sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if t.Endpoint != "" {
			so.BaseEndpoint = awssdk.String(t.Endpoint)
		}
		so.APIOptions = append(so.APIOptions, o.APIOptions...)
	})
	a.sns = sns.NewFromConfig(cfg, func(so *sns.Options) {
		if t.Endpoint != "" {
			so.BaseEndpoint = awssdk.String(t.Endpoint)
		}
		so.APIOptions = append(so.APIOptions, o.APIOptions...)
	})
	swept, err := SweepTailQueues(ctx, a.sqs, a.sns, prefix, a.clock.Now(), o.StaleAfter)
	a.Swept = swept
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		a.notice(fmt.Sprintf("could not sweep stale %s* queues: %v", prefix, err))
	}
	if err := a.setUp(ctx); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		if a.queueURL != "" {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			err = errors.Join(err, a.Close(cctx))
		}
		return nil, err
	}
	return a, nil
}

// DefaultTailOwner is user@host pid N, as tag values allow it.
func DefaultTailOwner() string {
	host, _ := os.Hostname()
	user := firstNonEmpty(os.Getenv("USER"), os.Getenv("USERNAME"), "unknown")
	return tagValue(fmt.Sprintf("%s@%s pid %d", user, host, os.Getpid()))
}

// tagValue keeps the characters SQS tag values allow, up to 256.
func tagValue(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, c := range b {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(" _.:/=+-@", c) >= 0 {
			out = append(out, c)
		}
	}
	return string(out[:min(len(out), 256)])
}

func (a *AWSTelemetry) notice(msg string) {
	if a.opts.Notice != nil {
		a.opts.Notice(msg)
	}
}

func (a *AWSTelemetry) setUp(ctx context.Context) error {
	var rnd [stack.TailQueueSuffixLen / 2]byte
	_, _ = rand.Read(rnd[:])
	a.queue = a.prefix + hex.EncodeToString(rnd[:])
	now := a.clock.Now().UTC().Format(time.RFC3339)
	cq, err := a.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  awssdk.String(a.queue),
		Attributes: map[string]string{"MessageRetentionPeriod": strconv.Itoa(tailRetention)},
		Tags:       map[string]string{TagTail: a.opts.Owner, TagTailCreated: now, TagTailAlive: now, TagTailTenant: a.tenant},
	})
	if err != nil {
		return awsStep("CreateQueue", "creating the temporary queue "+a.queue+" (tail needs sqs:CreateQueue and sqs:TagQueue on "+a.prefix+"* queues: the tenant's control role has them)", err)
	}
	a.queueURL = awssdk.ToString(cq.QueueUrl)
	a.alive = a.clock.Now()
	ga, err := a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: cq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return awsStep("GetQueueAttributes", "reading the temporary queue's ARN", err)
	}
	queueARN := ga.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if queueARN == "" {
		return &StepError{Step: "GetQueueAttributes", Msg: "SQS answered without the temporary queue's ARN; check the endpoint"}
	}
	doc, err := json.Marshal(policy.Document{Version: policy.Version, Statement: []policy.Statement{{
		Sid: "TenantTopicOnly", Effect: policy.Allow, Principal: &policy.Principal{Service: []string{"sns.amazonaws.com"}},
		Action: []string{"sqs:SendMessage"}, Resource: []string{queueARN},
		Condition: policy.Condition{"ArnEquals": {"aws:SourceArn": {a.topicARN}}},
	}}})
	if err != nil {
		return err
	}
	if _, err := a.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: cq.QueueUrl, Attributes: map[string]string{"Policy": string(doc)}}); err != nil {
		return awsStep("SetQueueAttributes", "letting only "+a.topicARN+" send to the temporary queue", err)
	}
	sub, err := a.sns.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: awssdk.String(a.topicARN), Protocol: awssdk.String("sqs"), Endpoint: awssdk.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}, ReturnSubscriptionArn: true,
	})
	if err != nil {
		var nf *snstypes.NotFoundException
		if errors.As(err, &nf) {
			return &StepError{Step: "Subscribe", Msg: fmt.Sprintf("tenant %s has no telemetry topic %s: check the profile's env, region and emit_role_arn, or ask the operator to on-board the tenant (`snavio tenant apply`)", a.tenant, a.topicARN), Err: err}
		}
		return awsStep("Subscribe", "subscribing the temporary queue to "+a.topicARN+" (the topic's policy must let the caller sns:Subscribe)", err)
	}
	a.subARN = awssdk.ToString(sub.SubscriptionArn)
	if _, err := a.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: cq.QueueUrl, Tags: map[string]string{TagTailSubscription: tagValue(a.subARN)}}); err != nil {
		return awsStep("TagQueue", "recording the subscription on the temporary queue", err)
	}
	return nil
}

// Queue is the temporary queue's name, TopicARN the topic it follows.
func (a *AWSTelemetry) Queue() string    { return a.queue }
func (a *AWSTelemetry) TopicARN() string { return a.topicARN }

// Stats says what the reader dropped so far.
func (a *AWSTelemetry) Stats() TelemetryStats { return a.stats }

// ReadTelemetry reads the next page of the tenant's events in sequence
// order: it long-polls the queue for up to q.Wait (at most 20 s), deletes
// what it received (the queue is the reader's own), holds events whose
// predecessors have not arrived for up to the reorder window, and hands
// over at most q.Limit. A temporary queue's stream starts at its
// subscription: q.After and q.Since are not needed and not read.
func (a *AWSTelemetry) ReadTelemetry(ctx context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error) {
	if a.closed {
		return wire.TelemetryPage{}, errors.New("the temporary telemetry queue was closed")
	}
	if q.Tenant != "" && q.Tenant != a.tenant {
		return wire.TelemetryPage{}, fmt.Errorf("this reader follows tenant %s, not %s", a.tenant, q.Tenant)
	}
	limit := q.Limit
	if limit <= 0 || limit > wire.TelemetryMaxLimit {
		limit = wire.TelemetryMaxLimit
	}
	if now := a.clock.Now(); now.Sub(a.alive) >= tailAliveEvery {
		if _, err := a.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: awssdk.String(a.queueURL), Tags: map[string]string{TagTailAlive: now.UTC().Format(time.RFC3339)}}); err != nil {
			return wire.TelemetryPage{}, a.readErr("TagQueue", err)
		}
		a.alive = now
	}
	if !a.order.ready(a.clock.Now()) {
		wait := min(q.Wait, sqsMaxWait)
		if due, ok := a.order.due(a.clock.Now()); ok {
			wait = min(wait, due)
		}
		if err := a.receive(ctx, wait); err != nil {
			return wire.TelemetryPage{}, err
		}
	}
	now := a.clock.Now()
	page := wire.TelemetryPage{Records: a.order.release(now, limit), ServerTime: now}
	if n := len(page.Records); n > 0 {
		page.NextAfter = page.Records[n-1].Seq
	} else {
		page.NextAfter = q.After
	}
	return page, nil
}

// receive makes one ReceiveMessage and deletes what it got.
func (a *AWSTelemetry) receive(ctx context.Context, wait time.Duration) error {
	secs := int32((wait + time.Second - 1) / time.Second)
	out, err := a.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: awssdk.String(a.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: secs,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return a.readErr("ReceiveMessage", err)
	}
	if len(out.Messages) == 0 {
		return nil
	}
	del := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
	now := a.clock.Now()
	for i, m := range out.Messages {
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: awssdk.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		msg := TelemetryMessage{Body: awssdk.ToString(m.Body), SentTimestamp: m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], Attributes: map[string]MessageAttribute{}}
		for k, v := range m.MessageAttributes {
			msg.Attributes[k] = MessageAttribute{Type: awssdk.ToString(v.DataType), Value: awssdk.ToString(v.StringValue)}
		}
		rec, err := DecodeTelemetryMessage(msg, a.topicARN, a.tenant)
		if err != nil {
			a.stats.Rejected++
			a.notice(fmt.Sprintf("dropped a message of the temporary queue that is not a telemetry event of tenant %s: %v", a.tenant, err))
			continue
		}
		switch a.order.add(rec, now) {
		case addRedelivered:
			a.stats.Redelivered++
		case addLate:
			a.stats.Late++
			a.notice(fmt.Sprintf("event #%d of tenant %s arrived after it was reported missing; dropped to keep the order", rec.Seq, a.tenant))
		}
	}
	dout, err := a.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: awssdk.String(a.queueURL), Entries: del})
	if err != nil {
		// What was read is kept; an undeleted message comes back after its
		// visibility timeout and is dropped as a redelivery.
		a.notice(fmt.Sprintf("could not delete read messages from the temporary queue: %v", short1(err)))
		return nil
	}
	if len(dout.Failed) > 0 {
		a.notice(fmt.Sprintf("could not delete %d read message(s) from the temporary queue: %s", len(dout.Failed), awssdk.ToString(dout.Failed[0].Message)))
	}
	return nil
}

// readErr maps a failed call of a running reader: unreachable and
// throttled are retryable, a queue that is gone is not.
func (a *AWSTelemetry) readErr(step string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var qdne *sqstypes.QueueDoesNotExist
	if errors.As(err, &qdne) || strings.Contains(err.Error(), "NonExistentQueue") {
		return &StepError{Step: step, Msg: fmt.Sprintf("the temporary queue %s is gone (deleted by hand, or swept by another tail after %s without a refresh): start tail again", a.queue, a.opts.StaleAfter), Err: err}
	}
	return awsStep(step, "reading the temporary queue "+a.queue, err)
}

// awsStep is a failed AWS call at step: retryable when SQS or SNS was
// unreachable, throttled or failed on its side.
func awsStep(step, doing string, err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return &StepError{Step: step, Retryable: true, Msg: fmt.Sprintf("%s: cannot reach AWS (%v): check the network, the region and the endpoint", doing, opErr.Err), Err: err}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		retry := apiErr.ErrorFault() == smithy.FaultServer || strings.Contains(code, "Throttl") || code == "RequestThrottled"
		return &StepError{Step: step, Retryable: retry, Msg: fmt.Sprintf("%s: %s: %s", doing, code, strings.TrimSpace(apiErr.ErrorMessage())), Err: err}
	}
	return &StepError{Step: step, Msg: fmt.Sprintf("%s: %v", doing, short1(err)), Err: err}
}

// Close unsubscribes and deletes the temporary queue. It is idempotent;
// what it cannot remove, a later tail sweeps.
func (a *AWSTelemetry) Close(ctx context.Context) error {
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	if a.subARN != "" {
		if _, err := a.sns.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: awssdk.String(a.subARN)}); err != nil && !notFound(err) {
			errs = append(errs, awsStep("Unsubscribe", "unsubscribing "+a.subARN, err))
		}
	}
	if a.queueURL != "" {
		if _, err := a.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: awssdk.String(a.queueURL)}); err != nil && !notFound(err) {
			errs = append(errs, awsStep("DeleteQueue", "deleting the temporary queue "+a.queue, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w; a later tail sweeps the queue after %s, or delete it with `aws sqs delete-queue --queue-url %s`", err, a.opts.StaleAfter, a.queueURL)
	}
	return nil
}

func notFound(err error) bool {
	var qdne *sqstypes.QueueDoesNotExist
	var nf *snstypes.NotFoundException
	return errors.As(err, &qdne) || errors.As(err, &nf) || strings.Contains(err.Error(), "NonExistentQueue")
}

// SweepTailQueues deletes (and unsubscribes) the temporary queues of
// tails that stopped without removing them: named prefix* (one tenant's,
// stack.Names.TailQueuePrefix),
// tagged TagTail, and not refreshed (TagTailAlive, else TagTailCreated)
// for staleAfter. A queue without the tag, or whose times cannot be read,
// is left alone. It returns the names it deleted.
func SweepTailQueues(ctx context.Context, sq *sqs.Client, sn *sns.Client, prefix string, now time.Time, staleAfter time.Duration) ([]string, error) {
	var swept []string
	var token *string
	for {
		out, err := sq.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: awssdk.String(prefix), MaxResults: awssdk.Int32(1000), NextToken: token})
		if err != nil {
			return swept, awsStep("ListQueues", "listing "+prefix+"* queues", err)
		}
		for _, u := range out.QueueUrls {
			name := u[strings.LastIndexByte(u, '/')+1:]
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			tags, err := sq.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: awssdk.String(u)})
			if err != nil {
				if notFound(err) {
					continue
				}
				return swept, awsStep("ListQueueTags", "reading the tags of "+name, err)
			}
			if tags.Tags[TagTail] == "" {
				continue
			}
			seen, err := time.Parse(time.RFC3339, firstNonEmpty(tags.Tags[TagTailAlive], tags.Tags[TagTailCreated]))
			if err != nil || now.Sub(seen) < staleAfter {
				continue
			}
			if sub := tags.Tags[TagTailSubscription]; sub != "" && sn != nil {
				if _, err := sn.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: awssdk.String(sub)}); err != nil && !notFound(err) {
					return swept, awsStep("Unsubscribe", "unsubscribing the stale queue "+name, err)
				}
			}
			if _, err := sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: awssdk.String(u)}); err != nil && !notFound(err) {
				return swept, awsStep("DeleteQueue", "deleting the stale queue "+name, err)
			}
			swept = append(swept, name)
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return swept, nil
		}
		token = out.NextToken
	}
}
