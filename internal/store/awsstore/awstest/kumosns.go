package awstest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// KumoPublishBatch stands in for SNS PublishBatch, which kumo lacks: it
// publishes each entry with Publish on kumo and answers per entry as SNS
// does. It records the size of each batch it was given. (PublishBatch's
// own wire format is tested against an httptest fake of SNS in awsstore.)
type KumoPublishBatch struct {
	SNS *sns.Client

	mu      sync.Mutex
	batches []int
}

// PublishBatch implements awsstore.PublishBatchAPI.
func (k *KumoPublishBatch) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	k.mu.Lock()
	k.batches = append(k.batches, len(in.PublishBatchRequestEntries))
	k.mu.Unlock()
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		if _, err := k.SNS.Publish(ctx, &sns.PublishInput{TopicArn: in.TopicArn, Message: e.Message, MessageAttributes: e.MessageAttributes}); err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// Batches returns the sizes of the batches given so far.
func (k *KumoPublishBatch) Batches() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int(nil), k.batches...)
}
