// Package ssefake stands in for the one part of SQS that kumo (the SQS
// emulator of the tests) does not keep: a queue's encryption attributes.
// kumo accepts KmsMasterKeyId and SqsManagedSseEnabled and drops them, so
// a test of code that sets or checks encryption wraps its kumo client in
// a Client, which remembers them per queue URL and adds them to
// GetQueueAttributes answers, as SQS reports them. Everything else is
// kumo's.
package ssefake

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Client is an *sqs.Client (against kumo) that keeps encryption
// attributes. It is safe for concurrent use.
type Client struct {
	*sqs.Client
	mu sync.Mutex
	// sse maps a queue URL to its KmsMasterKeyId and SqsManagedSseEnabled.
	sse map[string]map[string]string
}

// New wraps c.
func New(c *sqs.Client) *Client { return &Client{Client: c, sse: map[string]map[string]string{}} }

// encryption are the attributes kumo drops.
var encryption = []string{"KmsMasterKeyId", "SqsManagedSseEnabled"}

func (c *Client) remember(url string, attrs map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range encryption {
		v, ok := attrs[k]
		if !ok {
			continue
		}
		if c.sse[url] == nil {
			c.sse[url] = map[string]string{}
		}
		// As SQS: the two kinds of SSE exclude each other.
		switch {
		case k == "KmsMasterKeyId" && v != "":
			c.sse[url]["SqsManagedSseEnabled"] = "false"
		case k == "SqsManagedSseEnabled" && v == "true":
			delete(c.sse[url], "KmsMasterKeyId")
		}
		c.sse[url][k] = v
	}
}

// Set sets a queue's encryption attributes directly, as if the queue had
// been made with them (for queues a test creates with the bare client).
func (c *Client) Set(url string, attrs map[string]string) { c.remember(url, attrs) }

// CreateQueue creates the queue on kumo and remembers its encryption.
func (c *Client) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	out, err := c.Client.CreateQueue(ctx, in, optFns...)
	if err == nil {
		c.remember(aws.ToString(out.QueueUrl), in.Attributes)
	}
	return out, err
}

// SetQueueAttributes sets them on kumo and remembers the encryption.
func (c *Client) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	out, err := c.Client.SetQueueAttributes(ctx, in, optFns...)
	if err == nil {
		c.remember(aws.ToString(in.QueueUrl), in.Attributes)
	}
	return out, err
}

// GetQueueAttributes answers kumo's attributes plus the remembered
// encryption (all of it for "All", else the names asked for).
func (c *Client) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	out, err := c.Client.GetQueueAttributes(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	c.mu.Lock()
	sse := maps.Clone(c.sse[aws.ToString(in.QueueUrl)])
	c.mu.Unlock()
	if out.Attributes == nil {
		out.Attributes = map[string]string{}
	}
	for k, v := range sse {
		for _, n := range in.AttributeNames {
			if string(n) == "All" || string(n) == k {
				out.Attributes[k] = v
			}
		}
	}
	return out, nil
}

// DeleteQueue deletes it on kumo and forgets its encryption.
func (c *Client) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	out, err := c.Client.DeleteQueue(ctx, in, optFns...)
	if err == nil {
		c.mu.Lock()
		delete(c.sse, aws.ToString(in.QueueUrl))
		c.mu.Unlock()
	}
	return out, err
}
