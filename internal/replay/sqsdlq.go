package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// SQSAPI is what a DLQ replay calls of SQS.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// DeliveryKeys gives a target's delivery verification key
// (docs/security/delivery-signature.md).
type DeliveryKeys interface {
	DeliveryKey(ctx context.Context, target string) (provenance.Key, error)
}

// AttrDLQReason is the failure reason a dead-lettered message may carry
// (the embedded store sets it; SQS's redrive adds no attribute).
const AttrDLQReason = "snavio.dlq.reason"

// sqsMaxBatch is ReceiveMessage's and ChangeMessageVisibilityBatch's
// limit.
const sqsMaxBatch = 10

// SQSDLQOptions configure an SQS DLQ source.
type SQSDLQOptions struct {
	API   SQSAPI
	Queue string // the queue's name (--from dlq:QUEUE)
	// Lease is how long a received message stays hidden (whole seconds,
	// at least 1).
	Lease time.Duration
	// Wait is ReceiveMessage's long poll (default 1 s): a short poll
	// samples some of SQS's servers and can answer empty while messages
	// wait, which would end a pass early.
	Wait time.Duration
	// View says which targets dead-letter into the queue (by its ARN).
	View DLQRoutes
	// Keys gives those targets' delivery keys.
	Keys DeliveryKeys
}

// SQSDLQ reads a dead-letter queue on SQS with receives, as the local
// source does (docs/replay.md): each message is hidden for the lease and
// Ack deletes it; a pass ends when a receive returns nothing new. A
// message the dispatcher did not deliver to a target that dead-letters
// here (no valid delivery signature) comes with a Refusal. At the end of
// a pass the messages it received and did not delete are made visible
// again, so a plan (--dry-run) leaves the queue as it was, bar their
// receive counts.
type SQSDLQ struct {
	o        SQSDLQOptions
	url, arn string
	check    *DeliveryCheck
	seen     map[string]bool   // message ids returned in this pass
	held     map[string]string // receipt handle -> message id, not deleted yet
}

var _ Leaser = (*SQSDLQ)(nil)

// NewSQSDLQ resolves the queue's URL and ARN (GetQueueUrl,
// GetQueueAttributes) and returns its source.
func NewSQSDLQ(ctx context.Context, o SQSDLQOptions) (*SQSDLQ, error) {
	if o.API == nil || o.View == nil || o.Keys == nil || o.Queue == "" {
		return nil, errors.New("replay: SQSDLQOptions: API, Queue, View and Keys are required")
	}
	if o.Lease < time.Second {
		o.Lease = time.Second
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	u, err := o.API.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(o.Queue)})
	if err != nil {
		if queueMissing(err) {
			return nil, fmt.Errorf("%w: %s", ErrNoQueue, o.Queue)
		}
		return nil, fmt.Errorf("replay: find queue %s: %w", o.Queue, err)
	}
	at, err := o.API.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return nil, fmt.Errorf("replay: read the ARN of queue %s: %w", o.Queue, err)
	}
	s := &SQSDLQ{o: o, url: aws.ToString(u.QueueUrl), arn: at.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], seen: map[string]bool{}, held: map[string]string{}}
	if s.arn == "" {
		return nil, fmt.Errorf("replay: queue %s has no QueueArn attribute", o.Queue)
	}
	return s, nil
}

// queueMissing reports SQS's missing-queue error, typed (JSON protocol) or
// by the query protocol's code, which emulators send alone (as
// awsstore's SQS sender reads it).
func queueMissing(err error) bool {
	var missing *sqstypes.QueueDoesNotExist
	var api smithy.APIError
	return errors.As(err, &missing) || errors.As(err, &api) && (api.ErrorCode() == "QueueDoesNotExist" || api.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue")
}

// ErrNoQueue is a DLQ that does not exist.
var ErrNoQueue = errors.New("no such queue")

// Name implements Source.
func (s *SQSDLQ) Name() string { return "dlq:" + s.o.Queue }

// Lease implements Leaser.
func (s *SQSDLQ) Lease() time.Duration { return s.o.Lease }

// ARN is the queue's ARN.
func (s *SQSDLQ) ARN() string { return s.arn }

// load fetches the delivery keys of the targets that dead-letter here.
func (s *SQSDLQ) load(ctx context.Context) error {
	targets := s.o.View.DLQTargets(s.arn)
	keys := make(map[string]provenance.Key, len(targets))
	for t := range targets {
		k, err := s.o.Keys.DeliveryKey(ctx, t)
		if err != nil {
			return fmt.Errorf("the delivery key of target %s (to verify the messages in %s): %w", t, s.o.Queue, err)
		}
		keys[t] = k
	}
	s.check = &DeliveryCheck{Targets: targets, Verify: func(m *provenance.Message) error {
		k, ok := keys[m.Target]
		if !ok {
			if m.Signature == "" {
				return provenance.ErrUnsigned
			}
			return provenance.ErrForeignTarget
		}
		return provenance.Verify(k, m)
	}}
	return nil
}

// Next implements Source.
func (s *SQSDLQ) Next(ctx context.Context, cursor string, limit int) ([]Record, string, error) {
	if cursor == "" {
		clear(s.seen)
	}
	if cursor == "" || s.check == nil {
		if err := s.load(ctx); err != nil {
			return nil, cursor, err
		}
	}
	out, err := s.o.API.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(s.url),
		MaxNumberOfMessages:         int32(min(max(limit, 1), sqsMaxBatch)),
		VisibilityTimeout:           int32(s.o.Lease / time.Second),
		WaitTimeSeconds:             int32(s.o.Wait / time.Second),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, dlqCursor, fmt.Errorf("receive from %s: %w", s.o.Queue, err)
	}
	var recs []Record
	for _, m := range out.Messages {
		id, receipt := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
		s.held[receipt] = id
		if s.seen[id] {
			continue
		}
		s.seen[id] = true
		attrs := messageAttributes(m.MessageAttributes)
		body := []byte(aws.ToString(m.Body))
		recs = append(recs, Record{
			Ref: receipt, Source: attrs[provenance.AttrSource], Detail: body, At: sentAt(m.Attributes),
			Reason: attrs[AttrDLQReason], Refusal: s.check.Refusal(attrs, body), Attributes: attrs,
		})
	}
	if len(recs) == 0 {
		s.release(ctx)
	}
	return recs, dlqCursor, nil
}

// dlqCursor is the cursor of a DLQ source once a pass has begun.
const dlqCursor = "dlq"

// release makes the messages this pass received and did not delete
// visible again. Best effort: a message it misses reappears when its
// lease ends anyway.
func (s *SQSDLQ) release(ctx context.Context) {
	var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for receipt := range s.held {
		entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0})
		if len(entries) == sqsMaxBatch {
			_, _ = s.o.API.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.url), Entries: entries})
			entries = nil
		}
	}
	if len(entries) > 0 {
		_, _ = s.o.API.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.url), Entries: entries})
	}
	clear(s.held)
}

// Close makes the messages received and not deleted visible again (a run
// that paused or was interrupted mid-pass).
func (s *SQSDLQ) Close(ctx context.Context) error {
	s.release(ctx)
	return nil
}

// Ack implements Source: the message is deleted.
func (s *SQSDLQ) Ack(ctx context.Context, r Record) error {
	if _, err := s.o.API.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.url), ReceiptHandle: aws.String(r.Ref)}); err != nil {
		var invalid *sqstypes.ReceiptHandleIsInvalid
		if errors.As(err, &invalid) {
			// The lease ran out and the message is visible again: this
			// pass receives it again and the engine, finding it sent,
			// acks it with its new receipt.
			delete(s.seen, s.held[r.Ref])
			delete(s.held, r.Ref)
			return nil
		}
		return fmt.Errorf("delete from %s: %w", s.o.Queue, err)
	}
	delete(s.held, r.Ref)
	return nil
}

// messageAttributes are a message's string attributes.
func messageAttributes(in map[string]sqstypes.MessageAttributeValue) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if v.StringValue != nil {
			out[k] = *v.StringValue
		}
	}
	return out
}

// sentAt is SQS's SentTimestamp (epoch ms): when the message was first
// sent (a redrive to a DLQ keeps it); zero when absent or malformed.
func sentAt(attrs map[string]string) time.Time {
	ms, err := strconv.ParseInt(attrs[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
