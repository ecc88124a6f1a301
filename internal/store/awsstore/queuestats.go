package awsstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// GetQueueAttributesAPI is SQS's GetQueueAttributes (the queue monitor's
// reading).
type GetQueueAttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueStat is one reading of a route's queue. The age of its oldest
// message is not among SQS's queue attributes: it is the CloudWatch
// metric AWS/SQS ApproximateAgeOfOldestMessage.
type QueueStat struct {
	// Name is the queue's name (the CloudWatch dimension QueueName).
	Name string
	// Visible, InFlight and Delayed are ApproximateNumberOfMessages,
	// ...NotVisible and ...Delayed.
	Visible, InFlight, Delayed int64
}

// QueueStats reads route queues' attributes, resolving each queue ARN to
// its URL once (as the SQS sender does). Build it with NewQueueStats.
type QueueStats struct {
	urls  *SQSSender
	attrs GetQueueAttributesAPI
}

// NewQueueStats returns the reader on an SQS client built from
// cfg.AWSConfig and cfg.SQSOptions.
func NewQueueStats(cfg Config) (*QueueStats, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := sqs.NewFromConfig(cfg.AWSConfig, cfg.SQSOptions...)
	return &QueueStats{urls: &SQSSender{urls: c, region: cfg.AWSConfig.Region, cache: newBounded[*queueURL](cfg.MaxQueueURLs)}, attrs: c}, nil
}

// Stat reads the queue of arn: one GetQueueAttributes (and one
// GetQueueUrl the first time).
func (q *QueueStats) Stat(ctx context.Context, arn string) (QueueStat, error) {
	u, err := q.urls.resolve(ctx, arn)
	if err != nil {
		return QueueStat{}, err
	}
	var opts []func(*sqs.Options)
	if u.region != nil {
		opts = append(opts, u.region)
	}
	out, err := q.attrs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u.url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}}, opts...)
	if err != nil {
		if queueMissing(err) {
			q.urls.cache.drop(arn)
		}
		return QueueStat{}, fmt.Errorf("attributes of %s: %w", arn, queueHint(err))
	}
	a, _ := registry.ParseQueueARN(arn) // resolve parsed it
	st := QueueStat{Name: a.Name}
	for name, dst := range map[types.QueueAttributeName]*int64{
		types.QueueAttributeNameApproximateNumberOfMessages:           &st.Visible,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible: &st.InFlight,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed:    &st.Delayed,
	} {
		v, ok := out.Attributes[string(name)]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return QueueStat{}, fmt.Errorf("attributes of %s: %s=%q is not a count", arn, name, v)
		}
		*dst = n
	}
	return st, nil
}
