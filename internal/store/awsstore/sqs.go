package awsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var _ dispatch.Sender = (*SQSSender)(nil)

// One narrow interface per SQS operation the sender calls; *sqs.Client
// has them all.
type (
	SendMessageAPI interface {
		SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	}
	GetQueueURLAPI interface {
		GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	}
)

// DeliverySigner signs a delivered message for its target, setting its
// KeyID and Signature; *provenance.Signer is the one the platform uses
// (docs/security/delivery-signature.md).
type DeliverySigner interface {
	Sign(m *provenance.Message) error
}

// SQSSender is dispatch.Sender on SQS: one SendMessage per delivery, with
// the signed message's attributes (provenance.Message.Attributes, the same
// the local sender sets). Build it with NewSQSSender; it is safe for
// concurrent use.
type SQSSender struct {
	send   SendMessageAPI
	urls   GetQueueURLAPI
	sign   DeliverySigner
	region string
	// cache maps queue ARN -> URL.
	cache *bounded[*queueURL]
}

// NewSQSSender returns the sender on an SQS client built from
// cfg.AWSConfig and cfg.SQSOptions, signing with sign.
func NewSQSSender(cfg Config, sign DeliverySigner) (*SQSSender, error) {
	cfg.SetDefaults()
	err := cfg.Validate()
	if sign == nil {
		err = errors.Join(err, errors.New("awsstore: the SQS sender needs the delivery signer: every delivered message is signed for its target"))
	}
	if err != nil {
		return nil, err
	}
	c := sqs.NewFromConfig(cfg.AWSConfig, cfg.SQSOptions...)
	return &SQSSender{send: c, urls: c, sign: sign, region: cfg.AWSConfig.Region,
		cache: newBounded[*queueURL](cfg.MaxQueueURLs)}, nil
}

// queueURL is a resolved queue: its URL and, for a queue in another region
// than the client's, the per-call option that sends there.
type queueURL struct {
	url    string
	region func(*sqs.Options)
}

// resolve returns the queue of a route's ARN, from the cache or with one
// GetQueueUrl (the owner's account from the ARN, so a queue of another
// account works when its policy allows the dispatcher).
func (s *SQSSender) resolve(ctx context.Context, arn string) (*queueURL, error) {
	if q, ok := s.cache.get(arn); ok {
		return q, nil
	}
	a, err := registry.ParseQueueARN(arn)
	if err != nil {
		return nil, err
	}
	if a.Partition == registry.LocalPartition {
		return nil, fmt.Errorf("%q is a queue of a local dispatch serve, not an SQS queue: give the route an arn:aws:sqs:<region>:<account>:<queue> target", arn)
	}
	q := &queueURL{}
	var opts []func(*sqs.Options)
	if a.Region != s.region {
		region := a.Region
		q.region = func(o *sqs.Options) { o.Region = region }
		opts = append(opts, q.region)
	}
	out, err := s.urls.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(a.Name), QueueOwnerAWSAccountId: aws.String(a.Account)}, opts...)
	if err != nil {
		return nil, fmt.Errorf("resolve the queue URL of %s: %w", arn, queueHint(err))
	}
	q.url = aws.ToString(out.QueueUrl)
	s.cache.put(arn, q)
	return q, nil
}

// queueMissing reports SQS's missing-queue error: typed, as SQS's JSON
// protocol sends it, or by the query protocol's code, which SQS also
// sends (x-amzn-query-error) and emulators send alone.
func queueMissing(err error) bool {
	var missing *types.QueueDoesNotExist
	code := apiCode(err)
	return errors.As(err, &missing) || code == "QueueDoesNotExist" || code == "AWS.SimpleQueueService.NonExistentQueue"
}

// queueHint adds the fix to a missing queue's error.
func queueHint(err error) error {
	if queueMissing(err) {
		return fmt.Errorf("%w (create the queue, or point the route at one that exists)", err)
	}
	return err
}

// Send implements dispatch.Sender. It neither completes a strict claim nor
// writes the delivered event (SQS cannot share a transaction with
// DynamoDB), so the dispatcher does both after it returns.
func (s *SQSSender) Send(ctx context.Context, d *dispatch.Delivery) error {
	q, err := s.resolve(ctx, d.QueueARN)
	if err != nil {
		return fmt.Errorf("route queue: %w", err)
	}
	m := provenance.Message{CommandID: d.CommandID, Source: d.Source, Target: d.Target, Command: d.Command, Body: d.Body}
	if err := s.sign.Sign(&m); err != nil {
		return fmt.Errorf("signing the delivery of %s to %s: %w", d.CommandID, d.Target, err)
	}
	attrs := m.Attributes()
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(q.url),
		MessageBody:       aws.String(string(d.Body)),
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(attrs)),
	}
	for name, v := range attrs {
		in.MessageAttributes[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	var opts []func(*sqs.Options)
	if q.region != nil {
		opts = append(opts, q.region)
	}
	if _, err := s.send.SendMessage(ctx, in, opts...); err != nil {
		if queueMissing(err) {
			s.cache.drop(d.QueueARN) // re-resolved on the next delivery
		}
		return fmt.Errorf("deliver %s to %s: %w", d.CommandID, d.QueueARN, queueHint(err))
	}
	d.Completed, d.EventWritten = false, false
	return nil
}
