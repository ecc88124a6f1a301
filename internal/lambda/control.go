package lambda

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// FunctionControl is the control API behind a Function URL
// (SNAVIO_FUNCTION=control).
const FunctionControl = "control"

// DefaultControlMaxBody bounds a Function URL request's decoded body: the
// largest request Lambda accepts (6 MB).
const DefaultControlMaxBody = 6 << 20

// ControlConfig configures the control function.
type ControlConfig struct {
	// Store configures the AWS store; AccountID (the function's account,
	// which callers must be of) and SnapshotBucket are required.
	Store awsstore.Config
	// Roles is the naming rule that maps a caller's role to its principal
	// (stack.Names of the environment, given by cmd/snavio-lambda).
	Roles controlapi.Roles
	// SnapshotKey signs the snapshots POST /v1/snapshots/generate
	// publishes, under SnapshotKeyID, as the snapshot function does.
	SnapshotKey   ed25519.PrivateKey
	SnapshotKeyID string
	// DeliveryKey is the delivery master key GET /v1/delivery-keys
	// derives each target's verification key from.
	DeliveryKey []byte
	// Queues lets registration test-route the routes it writes (the
	// spec's dry run); nil skips the check.
	Queues controlapi.RouteQueues
	// MaxBody bounds a request's decoded body (DefaultControlMaxBody).
	MaxBody int64
	// Instance names this execution environment in flow records.
	Instance   string
	MetricsOut io.Writer
	Clock      clock.Clock
	Logger     *slog.Logger
}

// ControlConfigFromEnv reads a ControlConfig (without Roles) from getenv,
// reporting every bad or missing variable at once.
func ControlConfigFromEnv(getenv func(string) string, awsCfg aws.Config) (ControlConfig, error) {
	c := ControlConfig{
		Store:         storeFromEnv(getenv, awsCfg),
		SnapshotKeyID: getenv(EnvSnapshotKeyID),
		Instance:      getenv(EnvInstance),
	}
	var errs []error
	if f := getenv(EnvFunction); f != FunctionControl {
		errs = append(errs, fmt.Errorf("%s=%q: the control API's configuration is for %q", EnvFunction, f, FunctionControl))
	}
	var err error
	if c.SnapshotKey, err = signingKeyFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if c.DeliveryKey, err = deliveryKeyFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	if err := c.validate(false); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// validate reports every problem of c at once; withRoles checks Roles too
// (the environment cannot give it).
func (c *ControlConfig) validate(withRoles bool) error {
	var errs []error
	if c.Store.AccountID == "" {
		errs = append(errs, fmt.Errorf("%s: the control function needs its own 12-digit account: callers must be roles of it", EnvAccountID))
	}
	// It generates snapshots on request, as the snapshot function does.
	errs = append(errs, checkSnapshotWriter(FunctionControl, true, c.Store.SnapshotBucket, c.SnapshotKey, &c.SnapshotKeyID)...)
	if len(c.DeliveryKey) < provenance.MinMasterLen {
		errs = append(errs, fmt.Errorf("%s: the delivery master key is %d bytes; give base64 of at least %d random bytes", EnvDeliveryKey, len(c.DeliveryKey), provenance.MinMasterLen))
	}
	if withRoles && c.Roles == nil {
		errs = append(errs, errors.New("lambda: ControlConfig.Roles is required (the environment's role names)"))
	}
	store := c.Store
	store.SetDefaults()
	if err := store.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w (the environment is %s, the region AWS_REGION)", err, EnvEnv))
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultControlMaxBody
	}
	if c.Instance == "" {
		c.Instance = "lambda-" + FunctionControl
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

// ControlLeftOut are the resources the control function leaves out, and
// what a caller uses instead on AWS (docs/control-api.md).
var ControlLeftOut = map[controlapi.Resource]controlapi.Absence{
	controlapi.ResourceTokens: {Code: controlapi.CodeNotOnAWS,
		Why:     "control API tokens do not exist on AWS: every request is authenticated by IAM (SigV4 on the Function URL)",
		Instead: "sign the request (SigV4, service lambda) as a session of the operator role, snavio-<env>-operator, or of the tenant's control role, snavio-<env>-tenant-<tenant>"},
	controlapi.ResourceCredentials: {Code: controlapi.CodeNotOnAWS,
		Why:     "ingress credentials do not exist on AWS: producers put events on the command bus as the tenant's emit role",
		Instead: "give producers the tenant's emit role (emit_role_arn in their profile)"},
	controlapi.ResourceTelemetry: {Code: controlapi.CodeNotOnAWS,
		Why:     "telemetry is not read through the control API on AWS: each tenant's events go to its SNS topic",
		Instead: "subscribe an SQS queue to the tenant's telemetry topic (snavio-<env>-telemetry-<tenant>) and read it"},
	controlapi.ResourceQueues: {Code: controlapi.CodeNotOnAWS,
		Why:     "the control API hosts no queues on AWS: target queues are SQS queues",
		Instead: "use SQS directly (aws sqs ...), and register routes with the queues' ARNs"},
	controlapi.ResourceReplays: {Code: controlapi.CodeNotOnAWS,
		Why:     "the control function does not run replays: a replay outlasts a Lambda invocation, so the CLI runs it and asks the replayer endpoints (/v1/replayer/) for its audits and signatures",
		Instead: "run `snavio replay` with an aws profile as the operator"},
	controlapi.ResourceArchive: {Code: controlapi.CodeNotOnAWS,
		Why:     "the control API keeps no archive on AWS: the command bus archives every command",
		Instead: "inspect the bus's archive (snavio-<env>-commands) with EventBridge (aws events describe-archive)"},
}

// Control is the control function: the control API's handler (the same
// controlapi.New as `dispatch serve`) behind a Function URL.
type Control struct {
	api     *controlapi.Handler
	maxBody int64
	log     *slog.Logger
}

// NewControl builds the control API on the AWS store: the registry,
// delivery keys, explain (a dispatcher loaded on first use), snapshots
// (the snapshot function's generator), the replayer (audits in the flow
// table, verification and re-signing for a replay the CLI runs), whoami
// and openapi; the rest is ControlLeftOut.
func NewControl(ctx context.Context, cfg ControlConfig) (*Control, error) {
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	cfg.Store.Clock = cfg.Clock
	reg, err := awsstore.NewRegistryStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	snaps, err := awsstore.NewSnapshotStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	job, err := NewSnapshotJob(JobConfig{Function: FunctionSnapshot, Store: cfg.Store, SnapshotKey: cfg.SnapshotKey,
		SnapshotKeyID: cfg.SnapshotKeyID, Instance: cfg.Instance, MetricsOut: cfg.MetricsOut, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	signer, err := provenance.NewSigner(cfg.DeliveryKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDeliveryKey, err)
	}
	audits, err := awsstore.NewReplayAudits(cfg.Store, 0)
	if err != nil {
		return nil, err
	}
	pub := cfg.SnapshotKey.Public().(ed25519.PublicKey)
	explain := &lazyExplainer{build: func(ctx context.Context) (*dispatch.Dispatcher, error) {
		return explainDispatcher(ctx, cfg, reg, pub)
	}}
	api, err := controlapi.New(controlapi.Config{
		Auth:      controlapi.IAMAuth{Account: cfg.Store.AccountID, Roles: cfg.Roles},
		Clock:     cfg.Clock,
		Logger:    cfg.Logger,
		Registry:  controlapi.RegistryOptions{Registry: reg, Queues: cfg.Queues},
		Delivery:  controlapi.DeliveryOptions{Signer: signer, Registry: reg},
		Explain:   controlapi.ExplainOptions{Dispatcher: explain},
		Snapshots: controlapi.SnapshotOptions{Store: snaps, Generator: job, KeyID: cfg.SnapshotKeyID, PublicKey: pub},
		Replayer:  controlapi.ReplayerOptions{Audits: audits, Registry: reg, Delivery: signer},
		LeftOut:   ControlLeftOut,
	})
	if err != nil {
		return nil, err
	}
	return &Control{api: api, maxBody: cfg.MaxBody, log: cfg.Logger}, nil
}

// ControlNames is the environment's naming rule (stack.Names): the roles
// callers are mapped by, and the dispatcher's function roles that
// registration checks a target queue's policy against.
type ControlNames interface {
	controlapi.Roles
	FunctionRolePath() string
	FunctionRole(key string) string
}

// DispatcherRoles are the ARNs of the roles that send to target queues
// (ingest, slow) and read their attributes (the queue monitor).
func DispatcherRoles(n ControlNames, region, account string) controlapi.DispatcherRoles {
	arn := func(fn string) string {
		return "arn:" + awsstore.Partition(region) + ":iam::" + account + ":role" + n.FunctionRolePath() + n.FunctionRole(fn)
	}
	return controlapi.DispatcherRoles{Senders: []string{arn(FunctionIngest), arn(FunctionSlow)}, Monitor: arn(FunctionMonitor)}
}

// ControlHandler builds the control function from the environment, with
// names(env) as the naming rule, for aws-lambda-go's lambda.Start.
func ControlHandler(ctx context.Context, getenv func(string) string, log *slog.Logger, names func(env string) ControlNames) (any, error) {
	awsCfg, err := loadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := ControlConfigFromEnv(getenv, awsCfg)
	if err != nil {
		return nil, err
	}
	n := names(cfg.Store.Env)
	cfg.Logger, cfg.Roles = log, n
	cfg.Queues, err = controlapi.SQSRouteQueues(sqs.NewFromConfig(awsCfg), awsCfg.Region, DispatcherRoles(n, awsCfg.Region, cfg.Store.AccountID))
	if err != nil {
		return nil, err
	}
	c, err := NewControl(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return c.Handle, nil
}

// Handle serves one Function URL request. It always answers (an error
// would be Lambda's bare 502): a malformed event gets 400.
func (c *Control) Handle(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	r, refusal := functionURLRequest(ctx, &ev, c.maxBody)
	w := newURLResponse()
	if refusal != nil {
		c.log.Warn("refusing a malformed Function URL event", "err", refusal.Msg, "request_id", ev.RequestContext.RequestID)
		refusal.Write(w)
	} else {
		c.api.ServeHTTP(w, r)
	}
	return w.event(), nil
}

// lazyExplainer is the explain resource's dispatcher, assembled (its
// caches loaded) by the first explain, so other requests do not pay the
// cold load; a failed load is retried by the next explain.
type lazyExplainer struct {
	mu    sync.Mutex
	d     *dispatch.Dispatcher
	build func(context.Context) (*dispatch.Dispatcher, error)
}

func (l *lazyExplainer) Explain(ctx context.Context, source string, detail []byte) dispatch.Trace {
	l.mu.Lock()
	if l.d == nil {
		d, err := l.build(ctx)
		if err != nil {
			l.mu.Unlock()
			return dispatch.Trace{Source: source, Outcome: dispatch.Undecided, Reason: "loading the registry to explain: " + err.Error()}
		}
		l.d = d
	}
	d := l.d
	l.mu.Unlock()
	return d.Explain(ctx, source, detail)
}

// explainDispatcher assembles a dispatcher as the ingest function does,
// cold-loaded from the signed snapshot (or the registry tables). Explain
// is a dry run: it sends nothing (refusingSender) and its caches' events
// are not platform telemetry (the ingest function's are).
func explainDispatcher(ctx context.Context, cfg ControlConfig, reg *awsstore.RegistryStore, pub ed25519.PublicKey) (*dispatch.Dispatcher, error) {
	fs, err := awsstore.NewFlowStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	bg := &background{}
	cold, err := newColdStart(&Config{Store: cfg.Store, SnapshotKeys: snapshot.TrustedKeys{cfg.SnapshotKeyID: pub},
		SnapshotMaxAge: DefaultSnapshotMaxAge, Clock: cfg.Clock, Logger: cfg.Logger}, bg)
	if err != nil {
		return nil, err
	}
	asm, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: fs, Sender: refusingSender{},
		Telemetry: telemetry.Discard{}, Clock: cfg.Clock, Logger: cfg.Logger, Executor: bg.run, Flow: flow.Config{Instance: cfg.Instance}, Load: cold.load})
	if err != nil {
		return nil, err
	}
	// The global ban list now, as the ingest function loads it at init,
	// not in the background of the first explain.
	if err := asm.Deps.Flow.RefreshBans(ctx); err != nil {
		return nil, fmt.Errorf("loading the global ban list: %w", err)
	}
	return asm.Dispatcher, nil
}

// refusingSender is the explain dispatcher's Sender: the control function
// never delivers (its role may not send to any queue either).
type refusingSender struct{}

var errNoDelivery = errors.New("the control function explains commands and never delivers them")

func (refusingSender) Send(context.Context, *dispatch.Delivery) error { return errNoDelivery }
