package awsstore

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// testConfig is a config for tables of the test's own in the binary's
// DynamoDB Local, counting calls in c (nil: not counted).
func testConfig(t *testing.T, c *awstest.Calls) Config {
	t.Helper()
	d := emu.DynamoDB(t)
	cfg := Config{Env: emu.UniqueName(), AWSConfig: d.Config(), ClientOptions: d.ClientOptions()}
	if c != nil {
		cfg.ClientOptions = append(cfg.ClientOptions, c.DynamoDB)
	}
	return cfg
}

// ready fails t on err, else resets c's counts (nil: none) so that table
// creation is not counted.
func ready(t *testing.T, c *awstest.Calls, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		c.Take().Ops()
	}
}

// newFlowStore makes a flow store on a table of its own. The table has no
// TTL: the suites' fake clock runs days behind the wall clock, and
// DynamoDB Local's TTL reaper deletes, within a second of the wall clock,
// records that are live at the suites' now (which the store must never
// rely on anyway; TestCreateTablesTurnsOnTTL checks the real set-up).
func newFlowStore(t *testing.T, c *awstest.Calls) *FlowStore {
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
func newRegistryStore(t *testing.T, c *awstest.Calls) *RegistryStore {
	t.Helper()
	s, err := NewRegistryStore(testConfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ready(t, c, s.CreateTables(context.Background()))
	return s
}
