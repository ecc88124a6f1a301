package awsstore

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var emu awstest.Emulators

// TestMain stops the emulators after the tests; the test wrapper exits
// with m.Run's result.
func TestMain(m *testing.M) {
	defer emu.Close()
	m.Run()
}

// calls counts DynamoDB operations by name, with an SDK middleware.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) option(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.count) }

// count is the middleware, for any client's APIOptions.
func (c *calls) count(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("snavio-count-calls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			if c.n == nil {
				c.n = map[string]int{}
			}
			c.n[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// take returns the counts since the last take and resets them.
func (c *calls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

func total(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

func describe(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// testConfig is a config for tables of the test's own in the binary's
// DynamoDB Local, counting calls in c (nil: not counted).
func testConfig(t *testing.T, c *calls) Config {
	t.Helper()
	d := emu.DynamoDB(t)
	cfg := Config{Env: emu.UniqueName(), AWSConfig: d.Config(), ClientOptions: d.ClientOptions()}
	if c != nil {
		cfg.ClientOptions = append(cfg.ClientOptions, c.option)
	}
	return cfg
}

// ready fails t on err, else resets c's counts (nil: none) so that table
// creation is not counted.
func ready(t *testing.T, c *calls, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		c.take()
	}
}

// newFlowStore makes a flow store on a table of its own. The table has no
// TTL: the suites' fake clock runs days behind the wall clock, and
// DynamoDB Local's TTL reaper deletes, within a second of the wall clock,
// records that are live at the suites' now (which the store must never
// rely on anyway; TestCreateTablesTurnsOnTTL checks the real set-up).
func newFlowStore(t *testing.T, c *calls) *FlowStore {
	t.Helper()
	s, err := NewFlowStore(testConfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ready(t, c, createTable(context.Background(), s.tables, TableInput(s.table), false))
	return s
}

func TestFlowStoreOnDynamoDBLocal(t *testing.T) {
	began := time.Now()
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store { return newFlowStore(t, nil) })
	t.Logf("dispatchtest.TestFlowStore on DynamoDB Local: %v (emulator start included if this ran first)", time.Since(began).Round(time.Millisecond))
}

func TestCreateTablesTurnsOnTTL(t *testing.T) {
	ctx := context.Background()
	s := newFlowStore(t, nil)
	if err := s.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	d := emu.DynamoDB(t)
	c := dynamodb.NewFromConfig(d.Config(), d.ClientOptions()...)
	out, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if err != nil {
		t.Fatal(err)
	}
	ttl := out.TimeToLiveDescription
	if ttl == nil || aws.ToString(ttl.AttributeName) != attrExpiresAt || ttl.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Fatalf("TTL = %+v, want enabled on %s", ttl, attrExpiresAt)
	}
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
	if err != nil {
		t.Fatal(err)
	}
	if bm := desc.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Fatalf("billing mode = %+v, want on-demand", bm)
	}
	// Creating again is a no-op, TTL included.
	if err := s.CreateTables(ctx); err != nil {
		t.Fatalf("second CreateTables: %v", err)
	}
}

func TestRegistryOnDynamoDBLocal(t *testing.T) {
	began := time.Now()
	dispatchtest.TestRegistry(t, func(t *testing.T) registry.Store { return newRegistryStore(t, nil) })
	t.Logf("dispatchtest.TestRegistry on DynamoDB Local: %v", time.Since(began).Round(time.Millisecond))
}

// newRegistryStore makes a registry store on tables of its own.
func newRegistryStore(t *testing.T, c *calls) *RegistryStore {
	t.Helper()
	s, err := NewRegistryStore(testConfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ready(t, c, s.CreateTables(context.Background()))
	return s
}
