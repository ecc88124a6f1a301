package awsstore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
)

// TestDurability runs the durability contract on the archive table
// (DynamoDB Local) and the SQS hand-off (kumo).
func TestDurability(t *testing.T) {
	dispatchtest.TestDurability(t, func(t *testing.T) dispatchtest.Durability {
		ctx := context.Background()
		cfg := testConfig(t, nil)
		a, err := NewArchiveStore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ready(t, nil, a.CreateTables(ctx))
		k := emu.Kumo()
		cfg.AWSConfig, cfg.SQSOptions = k.Config(), k.SQSOptions()
		raw := sqs.NewFromConfig(cfg.AWSConfig, cfg.SQSOptions...)
		q, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("handoff-" + emu.UniqueName())})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewSQSHandoff(cfg, aws.ToString(q.QueueUrl))
		if err != nil {
			t.Fatal(err)
		}
		return dispatchtest.Durability{Archive: a, Handoff: h, Archived: a.Get}
	})
}

func TestSQSHandoffNeedsItsQueue(t *testing.T) {
	if _, err := NewSQSHandoff(Config{Env: "test"}, ""); err == nil {
		t.Fatal("a hand-off without a queue URL was built")
	}
}
