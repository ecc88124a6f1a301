// Package platform is what the CLI talks to, chosen by the profile's kind:
// a running `snavio dispatch serve` (local) or the AWS services directly
// (aws). Commands depend on the Platform interface only, with the types
// of internal/controlapi/wire; they never build a URL or set a header.
// Platforms open no connection and load no SDK configuration until a
// method needs it.
package platform

import (
	"context"
	"fmt"
	"time"

	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Target is the resolved description of where commands go.
type Target struct {
	// Profile names the profile, for errors that say how to change it.
	Profile        string `json:"-"`
	Kind           string `json:"kind"`
	Endpoint       string `json:"endpoint,omitempty"`
	Region         string `json:"region,omitempty"`
	DataDir        string `json:"data_dir,omitempty"`
	AWSProfile     string `json:"aws_profile,omitempty"`
	BusName        string `json:"bus_name,omitempty"`
	TablePrefix    string `json:"table_prefix,omitempty"`
	SnapshotBucket string `json:"snapshot_bucket,omitempty"`
	RoleARN        string `json:"role_arn,omitempty"`
	Env            string `json:"env,omitempty"`
	ControlURL     string `json:"control_url,omitempty"`
	EmitRoleARN    string `json:"emit_role_arn,omitempty"`
	ExternalID     string `json:"-"`
	// CredentialsFile is a local profile's ingress credentials file.
	CredentialsFile string `json:"credentials_file,omitempty"`
}

// RegistryFilter narrows a registry list; empty fields match all.
type RegistryFilter struct {
	Source, Tenant, Target, Command string
}

// ReplayStream is a running replay's updates, in order. Next returns
// io.EOF once the server ended the stream, an *UnreachableError when the
// connection broke first; Close ends it early (the server then records
// the run as interrupted).
type ReplayStream interface {
	Next() (wire.ReplayUpdate, error)
	Close() error
}

// Probe is one timed request to a local server, for `snavio doctor`:
// the raw answer, and the local clock before and after it.
type Probe struct {
	Status         int
	Body           []byte
	Date           string
	Sent, Received time.Time
	Err            error
}

// ProbePath is what a probe asks.
type ProbePath string

// Probe paths: liveness and readiness (no token), and who the token is.
const (
	ProbeHealth ProbePath = "/healthz"
	ProbeReady  ProbePath = "/readyz"
	ProbeWhoami ProbePath = "/v1/whoami"
)

// Platform is everything the CLI asks of the platform. Every method
// returns the control API's errors as *APIError (the server answered) or
// *UnreachableError (it did not); a platform that cannot do a thing yet
// returns *NotAvailableError.
type Platform interface {
	// Target describes the resolved platform.
	Target() Target

	// Whoami says who the credential is.
	Whoami(ctx context.Context) (wire.Whoami, error)
	// CheckCredential resolves the credential without using it.
	CheckCredential() error
	// Probe makes one timed request (doctor); auth sends the credential.
	Probe(ctx context.Context, path ProbePath, auth bool, now func() time.Time) Probe

	// Registry: routes, ACLs, keys, bans and quotas.
	ListRegistry(ctx context.Context, kind registry.Kind, f RegistryFilter) ([]registry.Item, error)
	GetRegistryItem(ctx context.Context, id registry.ID) (registry.Item, error)
	DeleteRegistryItem(ctx context.Context, id registry.ID, version int64) (registry.Change, error)
	RegistryHistory(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error)
	ApplyRegistry(ctx context.Context, req wire.ApplyRequest) (wire.ApplyResult, error)
	RevokeACL(ctx context.Context, req wire.ACLRevokeRequest) (registry.Change, error)
	CreateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error)
	RotateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error)
	DeliveryKey(ctx context.Context, target string) (wire.DeliveryKey, error)
	// TenantConfig is the tenant configuration document producers poll,
	// as served (keys.ParseTenantConfig reads it).
	TenantConfig(ctx context.Context, tenant string) ([]byte, error)

	// Tenant tokens and ingress credentials.
	IssueToken(ctx context.Context, req wire.TokenIssueRequest) (wire.TokenIssued, error)
	ListTokens(ctx context.Context, tenant string) (wire.TokenList, error)
	RevokeToken(ctx context.Context, id string) (wire.TokenRevoked, error)
	CreateCredential(ctx context.Context, req wire.CredentialCreateRequest) (wire.CredentialCreated, error)
	ListCredentials(ctx context.Context, tenant string) (wire.CredentialList, error)
	RevokeCredential(ctx context.Context, accessKeyID string) (wire.CredentialRevoked, error)

	// Telemetry: one page of a stream (a long poll with q.Wait), and a
	// consumer's acknowledgement.
	ReadTelemetry(ctx context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error)
	AckTelemetry(ctx context.Context, ack wire.TelemetryAck) error

	// Queues.
	ListQueues(ctx context.Context, after string, limit int) (wire.QueueList, error)
	GetQueue(ctx context.Context, name string) (wire.QueueInfo, error)
	CreateQueue(ctx context.Context, req wire.QueueCreateRequest) (wire.QueueCreateResult, error)
	ReceiveMessages(ctx context.Context, queue string, req wire.QueueReceiveRequest) (wire.QueueReceived, error)
	DeleteMessages(ctx context.Context, queue string, req wire.QueueDeleteRequest) (wire.QueueDeleteResult, error)
	PurgeQueue(ctx context.Context, queue string) (wire.QueuePurgeResult, error)

	// Snapshots: the latest signed document of a kind, the key that
	// verifies it, and a generation.
	LatestSnapshot(ctx context.Context, kind snapshot.Kind) ([]byte, error)
	SnapshotPublicKey(ctx context.Context) (wire.SnapshotPublicKey, error)
	GenerateSnapshot(ctx context.Context) (wire.SnapshotGenerated, error)

	// Replays: plan, start or resume a run (its updates stream), audits.
	PlanReplay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayPlanResponse, error)
	StartReplay(ctx context.Context, req wire.ReplayRequest) (ReplayStream, error)
	ResumeReplay(ctx context.Context, id string, req wire.ReplayResumeRequest) (ReplayStream, error)
	ListReplays(ctx context.Context) ([]wire.ReplayAudit, error)
	GetReplay(ctx context.Context, id string) (wire.ReplayAudit, error)

	// Explain is the dispatcher's decision trace for a signed command.
	Explain(ctx context.Context, req wire.ExplainRequest) (dispatch.Trace, error)
}

// New returns the platform of s's profile kind. lookupEnv reads the
// environment (os.LookupEnv in production; nil: none).
func New(s *config.Settings, lookupEnv func(string) (string, bool)) (Platform, error) {
	t := Target{
		Profile:        s.ProfileName,
		Kind:           s.Kind,
		Endpoint:       s.EndpointURL,
		Region:         s.Region,
		DataDir:        s.DataDir,
		AWSProfile:     s.AWSProfile,
		BusName:        s.BusName,
		TablePrefix:    s.TablePrefix,
		SnapshotBucket: s.SnapshotBucket,
		RoleARN:        s.RoleARN,
		Env:            s.Env,
		ControlURL:     s.ControlURL,
		EmitRoleARN:    s.EmitRoleARN,
		ExternalID:     s.ExternalID,

		CredentialsFile: s.CredentialsFile,
	}
	switch s.Kind {
	case config.KindLocal:
		if t.Endpoint == "" {
			return nil, fmt.Errorf("profile %q has no endpoint: set one with `snavio profile set %s --endpoint URL`", s.ProfileName, s.ProfileName)
		}
		l := NewLocal(t.Endpoint, LocalToken(lookupEnv, t.DataDir), nil)
		t.Endpoint = l.endpoint
		l.target = t
		return l, nil
	case config.KindAWS:
		return NewAWS(t, AWSOptions{}), nil
	default:
		return nil, fmt.Errorf("profile %q: unknown kind %q: use local or aws", s.ProfileName, s.Kind)
	}
}
