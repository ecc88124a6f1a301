package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/pkg/dispatch"
)

// The SQS operations the hand-off calls beyond SendMessage.
type (
	ReceiveMessageAPI interface {
		ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	}
	DeleteMessageAPI interface {
		DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	}
	ChangeMessageVisibilityAPI interface {
		ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	}
)

var _ dispatch.HandoffQueue = (*SQSHandoff)(nil)

// SQSHandoff is dispatch.HandoffQueue on one SQS queue, the escalation
// queue (docs/lambda.md): Put is SendMessage, which returns once SQS
// stored the message. On Lambda the slow function receives the queue's
// messages through an event source mapping and uses only Retry; Take and
// Done serve a worker that polls. Build it with NewSQSHandoff; it is safe
// for concurrent use.
type SQSHandoff struct {
	url        string
	send       SendMessageAPI
	receive    ReceiveMessageAPI
	del        DeleteMessageAPI
	visibility ChangeMessageVisibilityAPI
}

// NewSQSHandoff returns the hand-off on the queue at queueURL, with an SQS
// client built from cfg.AWSConfig and cfg.SQSOptions.
func NewSQSHandoff(cfg Config, queueURL string) (*SQSHandoff, error) {
	cfg.SetDefaults()
	err := cfg.Validate()
	if queueURL == "" {
		err = errors.Join(err, errors.New("awsstore: the SQS hand-off needs its queue URL (the escalation queue's)"))
	}
	if err != nil {
		return nil, err
	}
	c := sqs.NewFromConfig(cfg.AWSConfig, cfg.SQSOptions...)
	return &SQSHandoff{url: queueURL, send: c, receive: c, del: c, visibility: c}, nil
}

// Put implements dispatch.Handoff.
func (h *SQSHandoff) Put(ctx context.Context, payload []byte) error {
	if _, err := h.send.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(h.url), MessageBody: aws.String(string(payload))}); err != nil {
		return fmt.Errorf("awsstore hand-off: send: %w", err)
	}
	return nil
}

// Take implements dispatch.HandoffQueue with one ReceiveMessage that does
// not wait for messages (short polling).
func (h *SQSHandoff) Take(ctx context.Context, n int, visibility time.Duration) ([]dispatch.HandoffItem, error) {
	if n < 1 || n > 10 {
		return nil, fmt.Errorf("awsstore hand-off: take %d items: give 1 to 10", n)
	}
	out, err := h.receive.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(h.url), MaxNumberOfMessages: int32(n),
		VisibilityTimeout:           int32((visibility + time.Second - 1) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		return nil, fmt.Errorf("awsstore hand-off: receive: %w", err)
	}
	items := make([]dispatch.HandoffItem, len(out.Messages))
	for i, m := range out.Messages {
		items[i] = dispatch.HandoffItem{Handle: aws.ToString(m.ReceiptHandle), Payload: []byte(aws.ToString(m.Body)), Receives: ReceiveCount(m.Attributes)}
	}
	return items, nil
}

// ReceiveCount is a message's ApproximateReceiveCount from its system
// attributes; 1 when absent or unreadable (it was received at least once).
func ReceiveCount(attrs map[string]string) int {
	n, err := strconv.Atoi(attrs[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Done implements dispatch.HandoffQueue.
func (h *SQSHandoff) Done(ctx context.Context, it dispatch.HandoffItem) error {
	if _, err := h.del.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(h.url), ReceiptHandle: aws.String(it.Handle)}); err != nil {
		return fmt.Errorf("awsstore hand-off: delete: %w", err)
	}
	return nil
}

// Retry implements dispatch.HandoffQueue (whole seconds, as SQS counts).
func (h *SQSHandoff) Retry(ctx context.Context, it dispatch.HandoffItem, d time.Duration) error {
	_, err := h.visibility.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(h.url), ReceiptHandle: aws.String(it.Handle),
		VisibilityTimeout: int32((d + time.Second - 1) / time.Second)})
	if err != nil {
		return fmt.Errorf("awsstore hand-off: change visibility: %w", err)
	}
	return nil
}
