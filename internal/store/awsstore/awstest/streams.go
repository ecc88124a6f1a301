package awstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamPoller stands in for Lambda's DynamoDB Streams event source
// mapping, which no emulator here has: it reads a table's stream on
// DynamoDB Local from its start (TRIM_HORIZON) and returns the new
// records as the events.DynamoDBEvent Lambda would pass a handler.
// GetRecords answers in the wire shape Lambda forwards, so the event is
// its answer's JSON, not a conversion.
type StreamPoller struct {
	c         *dynamodbstreams.Client
	streamARN string
	bodies    *bodyTap
	iters     map[string]string // shard -> next iterator
	done      map[string]bool   // closed shards read to their end
	last      map[string]string // shard -> the last sequence number read
}

// bodyTap keeps the last response body of the client.
type bodyTap struct {
	next http.RoundTripper
	mu   sync.Mutex
	last []byte
}

func (b *bodyTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.last = body
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// NewStreamPoller finds table's stream on d.
func NewStreamPoller(ctx context.Context, d *DynamoDBLocal, table string) (*StreamPoller, error) {
	tap := &bodyTap{next: http.DefaultTransport}
	c := dynamodbstreams.NewFromConfig(d.Config(), func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(d.Endpoint)
		o.HTTPClient = &http.Client{Transport: tap}
	})
	out, err := c.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	if err != nil {
		return nil, err
	}
	if len(out.Streams) != 1 {
		return nil, fmt.Errorf("table %s has %d streams, want 1", table, len(out.Streams))
	}
	return &StreamPoller{c: c, streamARN: aws.ToString(out.Streams[0].StreamArn), bodies: tap, iters: map[string]string{}, done: map[string]bool{}, last: map[string]string{}}, nil
}

// Poll returns the records written since the last Poll, shard by shard,
// each shard's in order.
func (p *StreamPoller) Poll(ctx context.Context) (events.DynamoDBEvent, error) {
	var ev events.DynamoDBEvent
	desc, err := p.c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.streamARN)})
	if err != nil {
		return ev, err
	}
	for _, sh := range desc.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if p.done[id] {
			continue
		}
		it, ok := p.iters[id]
		if !ok {
			if it, err = p.iterator(ctx, sh.ShardId); err != nil {
				return ev, err
			}
		}
		for it != "" {
			out, err := p.c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)})
			var trimmed *types.TrimmedDataAccessException
			var expired *types.ExpiredIteratorException
			if errors.As(err, &trimmed) || errors.As(err, &expired) {
				// DynamoDB Local refuses a kept iterator of a shard after a
				// while: start again after the last record read.
				if it, err = p.iterator(ctx, sh.ShardId); err != nil {
					return ev, err
				}
				out, err = p.c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)})
			}
			if err != nil {
				return ev, err
			}
			p.bodies.mu.Lock()
			body := p.bodies.last
			p.bodies.mu.Unlock()
			var page events.DynamoDBEvent
			if err := json.Unmarshal(body, &page); err != nil {
				return ev, fmt.Errorf("GetRecords' answer is not a Lambda DynamoDB event: %w", err)
			}
			if len(page.Records) != len(out.Records) {
				return ev, fmt.Errorf("GetRecords' answer has %d records, the SDK read %d", len(page.Records), len(out.Records))
			}
			for i := range page.Records {
				page.Records[i].EventSourceArn = p.streamARN
				p.last[id] = page.Records[i].Change.SequenceNumber
			}
			ev.Records = append(ev.Records, page.Records...)
			next := aws.ToString(out.NextShardIterator)
			if next == "" {
				p.done[id] = true
			}
			if len(out.Records) == 0 || next == "" {
				p.iters[id] = next
				break
			}
			it = next
			p.iters[id] = next
		}
	}
	return ev, nil
}

// iterator is a new iterator of shard: after the last record read, or at
// its start.
func (p *StreamPoller) iterator(ctx context.Context, shard *string) (string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.streamARN), ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq := p.last[aws.ToString(shard)]; seq != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(seq)
	}
	out, err := p.c.GetShardIterator(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ShardIterator), nil
}
