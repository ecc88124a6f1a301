// Package awsstore implements the pkg/dispatch ports on AWS services. So
// far: flow control (dedupe claims, rate counters, prefetch leases, ban
// ledger, global bans, fairness rollups) on one DynamoDB table, and the
// registry with its changelog on two more, the telemetry outbox on a
// fourth with a stream, registry snapshots on S3, the Sender on SQS, and
// telemetry to one SNS topic per tenant.
// The design is docs/store/aws.md; the behaviour is the dispatchtest contract
// suites, which the tests run against DynamoDB Local.
package awsstore

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Config configures the AWS store. Call SetDefaults, then Validate (New
// does both).
type Config struct {
	// Env scopes every table name: snavio-<Env>-flow. Required; lower-case
	// letters, digits and '-', 1 to 32 characters ("prod", "staging").
	Env string
	// TablePrefix overrides the "snavio-<Env>-" prefix of table names.
	TablePrefix string
	// MaxAttempts bounds the conditional writes one Take or Acquire makes
	// when other writers keep changing the item under it (default 32).
	MaxAttempts int
	// AWSConfig is the SDK configuration (region, credentials, retries).
	AWSConfig aws.Config
	// ClientOptions adjust the DynamoDB client, e.g. BaseEndpoint for an
	// emulator, or a middleware in tests.
	ClientOptions []func(*dynamodb.Options)

	// SnapshotBucket is the S3 bucket of registry snapshots (bucket names
	// are global, so it is given, not derived from Env). Required by
	// NewSnapshotStore only.
	SnapshotBucket string
	// S3Options, SQSOptions and SNSOptions adjust those clients as
	// ClientOptions does DynamoDB's.
	S3Options  []func(*s3.Options)
	SQSOptions []func(*sqs.Options)
	SNSOptions []func(*sns.Options)
	// Clock orders snapshot versions and times outbox records (default:
	// the system clock).
	Clock clock.Clock
	// OutboxRetention is how long an outbox record is kept (its TTL;
	// default 7 days).
	OutboxRetention time.Duration
	// AccountID is the 12-digit AWS account of the tenants' telemetry
	// topics. Required by NewSNSPublisher only.
	AccountID string
	// MaxQueueURLs bounds the SQS sender's cache of queue URLs by queue
	// ARN (default 10000).
	MaxQueueURLs int
}

// The naming rules are compiled on first use: the CLI links this package
// (replay on aws) and compiling them at init cost 265 KB at every start.
var (
	envPattern     = lazyRE(`^[a-z0-9][a-z0-9-]{0,31}$`)
	tablePattern   = lazyRE(`^[a-zA-Z0-9_.-]{3,200}$`)
	accountPattern = lazyRE(`^[0-9]{12}$`)
	// bucketPattern is S3's general-purpose bucket naming rule.
	bucketPattern = lazyRE(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// SetDefaults fills the zero fields.
func (c *Config) SetDefaults() {
	if c.TablePrefix == "" && c.Env != "" {
		c.TablePrefix = "snavio-" + c.Env + "-"
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 32
	}
	if c.OutboxRetention == 0 {
		c.OutboxRetention = 7 * 24 * time.Hour
	}
	if c.MaxQueueURLs == 0 {
		c.MaxQueueURLs = 10_000
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if !envPattern().MatchString(c.Env) {
		errs = append(errs, fmt.Errorf("awsstore: env %q: give 1-32 lower-case letters, digits or '-', starting with a letter or digit (it scopes table names)", c.Env))
	}
	if c.TablePrefix != "" && !tablePattern().MatchString(c.ChangelogTable()) {
		errs = append(errs, fmt.Errorf("awsstore: table prefix %q makes table names such as %q, which DynamoDB refuses: use letters, digits, '_', '.' or '-'", c.TablePrefix, c.ChangelogTable()))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 1000 {
		errs = append(errs, fmt.Errorf("awsstore: max attempts %d: give 1 to 1000", c.MaxAttempts))
	}
	if c.MaxQueueURLs < 1 || c.MaxQueueURLs > 1_000_000 {
		errs = append(errs, fmt.Errorf("awsstore: max queue URLs %d: give 1 to 1000000", c.MaxQueueURLs))
	}
	if c.OutboxRetention < 0 {
		errs = append(errs, fmt.Errorf("awsstore: outbox retention %v: give a positive duration", c.OutboxRetention))
	}
	if c.AccountID != "" && !accountPattern().MatchString(c.AccountID) {
		errs = append(errs, fmt.Errorf("awsstore: account id %q: give the 12-digit AWS account id", c.AccountID))
	}
	if c.SnapshotBucket != "" && !bucketPattern().MatchString(c.SnapshotBucket) {
		errs = append(errs, fmt.Errorf("awsstore: snapshot bucket %q: give an S3 bucket name, 3-63 lower-case letters, digits, '.' or '-'", c.SnapshotBucket))
	}
	if c.AWSConfig.Region == "" {
		errs = append(errs, errors.New("awsstore: the AWS config has no region: set AWS_REGION or the profile's region"))
	}
	return errors.Join(errs...)
}

// FlowTable is the name of the flow-control table.
func (c Config) FlowTable() string { return c.TablePrefix + "flow" }

// RegistryTable is the name of the registry's record table.
func (c Config) RegistryTable() string { return c.TablePrefix + "registry" }

// OutboxTable is the name of the telemetry outbox table.
func (c Config) OutboxTable() string { return c.TablePrefix + "outbox" }

// ChangelogTable is the name of the registry's changelog table.
func (c Config) ChangelogTable() string { return c.TablePrefix + "changelog" }

// TopicPrefix is the name of every tenant's telemetry topic up to the
// tenant: snavio-<Env>-telemetry-.
func (c Config) TopicPrefix() string { return "snavio-" + c.Env + "-telemetry-" }
