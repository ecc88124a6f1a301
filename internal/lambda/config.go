// Package lambda hosts the dispatcher's stages as AWS Lambda functions:
// Ingest (the EventBridge rule's target: shield and fast stage in one
// function) and Slow (the escalation queue's consumer), the jobs, and the
// control API behind a Function URL (Control). The hand-off between the
// stages and its durability contract are in docs/lambda.md.
package lambda

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/internal/sdkbody"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Functions a bootstrap can run (SNAVIO_FUNCTION).
const (
	FunctionIngest = "ingest"
	FunctionSlow   = "slow"
)

// Environment variables a function reads (docs/lambda.md).
const (
	EnvFunction        = "SNAVIO_FUNCTION"
	EnvEnv             = "SNAVIO_ENV"
	EnvTablePrefix     = "SNAVIO_TABLE_PREFIX"
	EnvEscalationQueue = "SNAVIO_ESCALATION_QUEUE_URL"
	EnvDeliveryKey     = "SNAVIO_DELIVERY_KEY"
	EnvMaxReceives     = "SNAVIO_SLOW_MAX_RECEIVES"
	EnvInstance        = "AWS_LAMBDA_LOG_STREAM_NAME"
)

// DefaultMaxReceives is how many receives of an escalation the slow
// function tries before it gives up with snavio.command.failed; the
// queue's redrive maxReceiveCount must be larger (docs/lambda.md).
const DefaultMaxReceives = 5

// Config configures a Host.
type Config struct {
	// Function is FunctionIngest or FunctionSlow.
	Function string
	// Store configures the AWS store (tables, region, clients).
	Store awsstore.Config
	// EscalationQueueURL is the SQS queue the ingest function hands
	// escalations to and the slow function consumes.
	EscalationQueueURL string
	// DeliveryKey is the master key delivered messages are signed with
	// (provenance.NewSigner).
	DeliveryKey []byte
	// MaxReceives: see DefaultMaxReceives.
	MaxReceives int
	// Instance names this execution environment in flow control's
	// records (leases, rollups).
	Instance string
	// SnapshotKeys are the trusted snapshot signing keys and
	// SnapshotMaxAge the oldest snapshot taken, when Store.SnapshotBucket
	// is set (coldstart.go).
	SnapshotKeys   snapshot.TrustedKeys
	SnapshotMaxAge time.Duration
	// EscalationOptions adjust the escalation queue's SQS client (tests
	// point it at an emulator).
	EscalationOptions []func(*sqs.Options)
	Clock             clock.Clock
	Logger            *slog.Logger

	// Metrics receives the dispatcher's metrics (Handler: EMF lines on
	// standard output after each invocation).
	Metrics telemetry.Metrics
}

// FromEnv reads a Config from getenv (os.Getenv) with aws as the SDK
// configuration, reporting every bad or missing variable at once.
func FromEnv(getenv func(string) string, awsCfg aws.Config) (Config, error) {
	c := Config{
		Function:           getenv(EnvFunction),
		Store:              awsstore.Config{Env: getenv(EnvEnv), TablePrefix: getenv(EnvTablePrefix), AWSConfig: awsCfg},
		EscalationQueueURL: getenv(EnvEscalationQueue),
		Instance:           getenv(EnvInstance),
	}
	var errs []error
	var err error
	if c.DeliveryKey, err = deliveryKeyFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if v := getenv(EnvMaxReceives); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: give a whole number of receives, 1 to 100", EnvMaxReceives, v))
		}
		c.MaxReceives = n
	}
	errs = append(errs, snapshotFromEnv(getenv, &c)...)
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// deliveryKeyFromEnv reads the delivery master key, nil when unset (the
// length is checked by the caller's validate).
func deliveryKeyFromEnv(getenv func(string) string) ([]byte, error) {
	k := getenv(EnvDeliveryKey)
	if k == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
	if err != nil {
		return nil, fmt.Errorf("%s is not base64: give the delivery master key as base64 of %d or more random bytes", EnvDeliveryKey, provenance.MinMasterLen)
	}
	return b, nil
}

// validate reports every problem of c at once (the store's own config is
// checked when its stores are built).
func (c *Config) validate() error {
	var errs []error
	if c.Function != FunctionIngest && c.Function != FunctionSlow {
		errs = append(errs, fmt.Errorf("%s=%q: give %q (the EventBridge rule's target) or %q (the escalation queue's consumer), or a job: %q, %q, %q or %q, or %q (the control API, lambda.ControlHandler)", EnvFunction, c.Function, FunctionIngest, FunctionSlow, FunctionOutbox, FunctionSnapshot, FunctionMonitor, FunctionAuditor, FunctionControl))
	}
	if u, err := url.Parse(c.EscalationQueueURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s=%q: give the escalation queue's URL, https://sqs.<region>.amazonaws.com/<account>/<queue>", EnvEscalationQueue, c.EscalationQueueURL))
	}
	if len(c.DeliveryKey) < provenance.MinMasterLen {
		errs = append(errs, fmt.Errorf("%s: the delivery master key is %d bytes; give base64 of at least %d random bytes", EnvDeliveryKey, len(c.DeliveryKey), provenance.MinMasterLen))
	}
	if c.MaxReceives == 0 {
		c.MaxReceives = DefaultMaxReceives
	}
	if c.MaxReceives < 1 || c.MaxReceives > 100 {
		errs = append(errs, fmt.Errorf("%s=%d: give 1 to 100 (and a redrive maxReceiveCount above it)", EnvMaxReceives, c.MaxReceives))
	}
	store := c.Store
	store.SetDefaults()
	if err := store.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w (the environment is %s, the region AWS_REGION)", err, EnvEnv))
	}
	if c.Instance == "" {
		c.Instance = "lambda"
	}
	if err := c.validateSnapshot(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// loadAWSConfig is the SDK's default configuration (region and
// credentials from Lambda's environment) with sdkbody's HTTP client.
func loadAWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	sdkbody.Use(&cfg)
	return cfg, nil
}

// Handler builds the host from the environment (getenv, with the SDK's
// default configuration: region and credentials from Lambda's
// environment) and returns the handler SNAVIO_FUNCTION names, for
// aws-lambda-go's lambda.StartWithOptions with WithEnableSIGTERM (the
// host stores its kept telemetry at SIGTERM).
func Handler(ctx context.Context, getenv func(string) string, log *slog.Logger) (any, error) {
	awsCfg, err := loadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := FromEnv(getenv, awsCfg)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	emf := NewEMF(cfg.Function, clock.System())
	cfg.Metrics = emf
	h, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	h.closeOnSIGTERM(log)
	return stageWithMetrics(h, cfg.Function, emf, os.Stdout, log), nil
}
