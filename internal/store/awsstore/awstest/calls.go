package awstest

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Calls counts AWS operations with an SDK middleware: add Count to a
// client's APIOptions (or pass DynamoDB, SQS, S3, SNS as client options)
// and read the counts with Take. Safe for concurrent use.
type Calls struct {
	mu sync.Mutex
	n  Counts
}

// Counts are operations counted by "Service.Operation"
// ("DynamoDB.PutItem", "SQS.SendMessage").
type Counts map[string]int

// Count is the middleware, for any client's APIOptions.
func (c *Calls) Count(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("snavio-count-calls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			if c.n == nil {
				c.n = Counts{}
			}
			c.n[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// DynamoDB, SQS, S3 and SNS are client options adding Count.
func (c *Calls) DynamoDB(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.Count) }
func (c *Calls) SQS(o *sqs.Options)           { o.APIOptions = append(o.APIOptions, c.Count) }
func (c *Calls) S3(o *s3.Options)             { o.APIOptions = append(o.APIOptions, c.Count) }
func (c *Calls) SNS(o *sns.Options)           { o.APIOptions = append(o.APIOptions, c.Count) }

// Take returns the counts since the last Take and resets them.
func (c *Calls) Take() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	if out == nil {
		out = Counts{}
	}
	c.n = Counts{}
	return out
}

// Total is the number of calls.
func (m Counts) Total() int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// Of is the number of calls to service ("DynamoDB", "SQS").
func (m Counts) Of(service string) int {
	t := 0
	for k, v := range m {
		if strings.HasPrefix(k, service+".") {
			t += v
		}
	}
	return t
}

// Ops is the counts by operation name alone, for a counter on clients of
// one service.
func (m Counts) Ops() Counts {
	out := make(Counts, len(m))
	for k, v := range m {
		out[k[strings.IndexByte(k, '.')+1:]] += v
	}
	return out
}

// String is "Op=n Op=n", sorted; "" when nothing was called.
func (m Counts) String() string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			parts = append(parts, k+"="+strconv.Itoa(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
