package lambda

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// The job functions a bootstrap can run besides ingest and slow
// (SNAVIO_FUNCTION; docs/lambda.md has each one's trigger).
const (
	FunctionOutbox   = "outbox"
	FunctionSnapshot = "snapshot"
	FunctionMonitor  = "queue-monitor"
	FunctionAuditor  = "fairness-auditor"
)

// Environment variables the job functions read besides SNAVIO_ENV and
// SNAVIO_TABLE_PREFIX.
const (
	EnvAccountID          = "SNAVIO_ACCOUNT_ID"
	EnvSnapshotBucket     = "SNAVIO_SNAPSHOT_BUCKET"
	EnvSnapshotSigningKey = "SNAVIO_SNAPSHOT_SIGNING_KEY"
	EnvSnapshotKeyID      = "SNAVIO_SNAPSHOT_KEY_ID"
)

// DefaultSnapshotKeyID names the snapshot signing key when
// SNAVIO_SNAPSHOT_KEY_ID is not set.
const DefaultSnapshotKeyID = "snavio-ed25519"

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// IsJob reports whether function names one of the job functions.
func IsJob(function string) bool {
	switch function {
	case FunctionOutbox, FunctionSnapshot, FunctionMonitor, FunctionAuditor:
		return true
	}
	return false
}

// JobConfig configures a job function.
type JobConfig struct {
	// Function is one of the job functions.
	Function string
	// Store configures the AWS store; AccountID is required by the outbox
	// function, SnapshotBucket by the snapshot function.
	Store awsstore.Config
	// SnapshotKey signs snapshots (the snapshot function): an Ed25519 key
	// from the 32-byte seed in SNAVIO_SNAPSHOT_SIGNING_KEY.
	SnapshotKey   ed25519.PrivateKey
	SnapshotKeyID string
	// Instance names this execution environment in flow records.
	Instance string
	// CloudWatchOptions adjust the CloudWatch client (the queue monitor;
	// tests point it at a fake).
	CloudWatchOptions []func(*cloudwatch.Options)
	// Outbox tunes the outbox drain (tests: no waiting between attempts).
	Outbox OutboxConfig
	// MetricsOut receives the EMF lines (default standard output, which
	// Lambda ships to CloudWatch Logs).
	MetricsOut io.Writer
	Clock      clock.Clock
	Logger     *slog.Logger
}

// JobConfigFromEnv reads a JobConfig from getenv, reporting every bad or
// missing variable at once.
func JobConfigFromEnv(getenv func(string) string, awsCfg aws.Config) (JobConfig, error) {
	c := JobConfig{
		Function:      getenv(EnvFunction),
		Store:         storeFromEnv(getenv, awsCfg),
		SnapshotKeyID: getenv(EnvSnapshotKeyID),
		Instance:      getenv(EnvInstance),
	}
	var errs []error
	var err error
	if c.SnapshotKey, err = signingKeyFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// storeFromEnv is the AWS store's configuration a job or the control
// function reads: environment, table prefix, account and bucket.
func storeFromEnv(getenv func(string) string, awsCfg aws.Config) awsstore.Config {
	return awsstore.Config{Env: getenv(EnvEnv), TablePrefix: getenv(EnvTablePrefix), AWSConfig: awsCfg,
		AccountID: getenv(EnvAccountID), SnapshotBucket: getenv(EnvSnapshotBucket)}
}

// signingKeyFromEnv reads the snapshot signing key, nil when unset.
func signingKeyFromEnv(getenv func(string) string) (ed25519.PrivateKey, error) {
	k := getenv(EnvSnapshotSigningKey)
	if k == "" {
		return nil, nil
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s: give base64 of a %d-byte Ed25519 seed (`head -c32 /dev/urandom | base64`)", EnvSnapshotSigningKey, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// checkSnapshotWriter checks what a function that publishes snapshots
// (fn: the snapshot and control functions) needs when writes is set:
// the bucket and the signing key; and defaults and checks the key id.
func checkSnapshotWriter(fn string, writes bool, bucket string, key ed25519.PrivateKey, keyID *string) []error {
	var errs []error
	if writes && bucket == "" {
		errs = append(errs, fmt.Errorf("%s: the %s function needs the S3 bucket of registry snapshots", EnvSnapshotBucket, fn))
	}
	if writes && key == nil {
		errs = append(errs, fmt.Errorf("%s: the %s function needs the Ed25519 signing key (base64 of its 32-byte seed)", EnvSnapshotSigningKey, fn))
	}
	if *keyID == "" {
		*keyID = DefaultSnapshotKeyID
	}
	if !keyIDPattern.MatchString(*keyID) {
		errs = append(errs, fmt.Errorf("%s=%q: give 1 to 64 letters, digits, '.', '_' or '-'", EnvSnapshotKeyID, *keyID))
	}
	return errs
}

func (c *JobConfig) validate() error {
	var errs []error
	if !IsJob(c.Function) {
		errs = append(errs, fmt.Errorf("%s=%q: give %q, %q, %q or %q", EnvFunction, c.Function, FunctionOutbox, FunctionSnapshot, FunctionMonitor, FunctionAuditor))
	}
	if c.Function == FunctionOutbox && c.Store.AccountID == "" {
		errs = append(errs, fmt.Errorf("%s: the outbox function needs the 12-digit account that holds the tenants' telemetry topics", EnvAccountID))
	}
	errs = append(errs, checkSnapshotWriter(c.Function, c.Function == FunctionSnapshot, c.Store.SnapshotBucket, c.SnapshotKey, &c.SnapshotKeyID)...)
	store := c.Store
	store.SetDefaults()
	if err := store.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w (the environment is %s, the region AWS_REGION)", err, EnvEnv))
	}
	if c.Instance == "" {
		c.Instance = "lambda-" + c.Function
	}
	if c.MetricsOut == nil {
		c.MetricsOut = os.Stdout
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

// JobHandler builds the job function SNAVIO_FUNCTION names from the
// environment, for aws-lambda-go's lambda.Start.
func JobHandler(ctx context.Context, getenv func(string) string, log *slog.Logger) (any, error) {
	awsCfg, err := loadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := JobConfigFromEnv(getenv, awsCfg)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	return NewJob(cfg)
}

// NewJob builds the handler of cfg.Function: (*OutboxDrain).Handle,
// (*SnapshotJob).Handle, (*QueueMonitor).Handle or (*Auditor).Handle.
func NewJob(cfg JobConfig) (any, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Store.Clock = cfg.Clock
	switch cfg.Function {
	case FunctionOutbox:
		d, err := newOutboxJob(cfg)
		if err != nil {
			return nil, err
		}
		return d.Handle, nil
	case FunctionSnapshot:
		j, err := NewSnapshotJob(cfg)
		if err != nil {
			return nil, err
		}
		return j.Handle, nil
	case FunctionMonitor:
		j, err := NewQueueMonitor(cfg)
		if err != nil {
			return nil, err
		}
		return j.Handle, nil
	default:
		j, err := NewAuditor(cfg)
		if err != nil {
			return nil, err
		}
		return j.Handle, nil
	}
}

// newOutboxJob is the outbox drain on the store's SNS publisher and
// outbox table, flushing its metrics after every batch.
func newOutboxJob(cfg JobConfig) (*outboxJob, error) {
	pub, err := awsstore.NewSNSPublisher(cfg.Store)
	if err != nil {
		return nil, err
	}
	ob, err := awsstore.NewOutboxStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	oc := cfg.Outbox
	oc.Clock, oc.Logger = cfg.Clock, cfg.Logger
	oc.Metrics = NewEMF(FunctionOutbox, cfg.Clock)
	return &outboxJob{d: NewOutboxDrain(pub, ob, oc), out: cfg.MetricsOut}, nil
}

// outboxJob is the drain with its metrics flushed per invocation.
type outboxJob struct {
	d   *OutboxDrain
	out io.Writer
}

func (j *outboxJob) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp, err := j.d.Handle(ctx, ev)
	flushMetrics(j.d.cfg.Metrics, j.out, j.d.cfg.Logger)
	return resp, err
}

// flushMetrics writes an invocation's metrics; a failure is logged, not
// the invocation's.
func flushMetrics(m *EMF, out io.Writer, log *slog.Logger) {
	if err := m.Flush(out); err != nil {
		log.Warn("writing the invocation's metrics failed", "err", err)
	}
}

// jobBase is what every scheduled job has: the outbox its telemetry goes
// to, stored once a run, and its metrics.
type jobBase struct {
	sink    *outbox
	metrics *EMF
	out     io.Writer
	log     *slog.Logger
}

func newJobBase(cfg JobConfig) (jobBase, error) {
	ob, err := awsstore.NewOutboxStore(cfg.Store)
	if err != nil {
		return jobBase{}, err
	}
	return jobBase{sink: &outbox{store: ob}, metrics: NewEMF(cfg.Function, cfg.Clock), out: cfg.MetricsOut, log: cfg.Logger}, nil
}

// finish stores the run's telemetry and writes its metrics; the error is
// the telemetry's.
func (j *jobBase) finish(ctx context.Context) error {
	err := j.sink.flush(ctx)
	flushMetrics(j.metrics, j.out, j.log)
	return err
}
