package platform

import (
	"context"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// NotAvailableError is an operation the platform of the profile cannot
// do. What names the operation as the CLI spells it (or the server's
// message); Reason, when set, says why and what to use instead (empty:
// it is yet to come on aws). Err is the server's *APIError when it
// answered 501.
type NotAvailableError struct {
	What   string
	Reason string
	Err    error
}

func (e *NotAvailableError) Error() string {
	if e.Reason == "" {
		return "not available on aws yet: " + e.What
	}
	return e.What + ": " + e.Reason
}

// Unwrap returns the server's answer, if any.
func (e *NotAvailableError) Unwrap() error { return e.Err }

// AWS is the platform of an aws profile. Commands are put on the
// EventBridge bus through Bus (NewBus); control operations go through the
// control API's Function URL with SigV4 (aws_control.go); the queue
// operations act on SQS (aws_queues.go); what has no host on aws yet
// returns a *NotAvailableError.
type AWS struct {
	target  Target
	control awsControl
	// sdk is the SDK configuration and SQS client of the queue
	// operations, built on first use (aws_queues.go).
	sdk awsSDK
}

var _ Platform = (*AWS)(nil)

func notAvailable(what string) error { return &NotAvailableError{What: what} }

// Target implements Platform.
func (c *AWS) Target() Target { return c.target }

// Whoami implements Platform.
func (c *AWS) Whoami(ctx context.Context) (wire.Whoami, error) {
	api, err := c.api("whoami")
	if err != nil {
		return wire.Whoami{}, err
	}
	return api.Whoami(ctx)
}

// CheckCredential implements Platform: the profile's AWS credentials
// resolve (AssumeRole included).
func (c *AWS) CheckCredential() error {
	api, err := c.api("control-API credentials")
	if err != nil {
		return err
	}
	return api.CheckCredential()
}

// Probe implements Platform: one signed request to the control API
// (the Function URL refuses an unsigned one).
func (c *AWS) Probe(ctx context.Context, path ProbePath, auth bool, now func() time.Time) Probe {
	api, err := c.api("probe " + string(path))
	if err != nil {
		return Probe{Err: err}
	}
	return api.Probe(ctx, path, auth, now)
}

// ListRegistry implements Platform: "route list", "acl list", ...
func (c *AWS) ListRegistry(ctx context.Context, kind registry.Kind, f RegistryFilter) ([]registry.Item, error) {
	api, err := c.api(string(kind) + " list")
	if err != nil {
		return nil, err
	}
	return api.ListRegistry(ctx, kind, f)
}

// GetRegistryItem implements Platform.
func (c *AWS) GetRegistryItem(ctx context.Context, id registry.ID) (registry.Item, error) {
	api, err := c.api(idKind(id) + " get")
	if err != nil {
		return registry.Item{}, err
	}
	return api.GetRegistryItem(ctx, id)
}

// DeleteRegistryItem implements Platform.
func (c *AWS) DeleteRegistryItem(ctx context.Context, id registry.ID, version int64) (registry.Change, error) {
	api, err := c.api(idKind(id) + " delete")
	if err != nil {
		return registry.Change{}, err
	}
	return api.DeleteRegistryItem(ctx, id, version)
}

// RegistryHistory implements Platform.
func (c *AWS) RegistryHistory(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error) {
	api, err := c.api(idKind(id) + " history")
	if err != nil {
		return nil, err
	}
	return api.RegistryHistory(ctx, id, limit)
}

// ApplyRegistry implements Platform.
func (c *AWS) ApplyRegistry(ctx context.Context, req wire.ApplyRequest) (wire.ApplyResult, error) {
	api, err := c.api("registry apply (route register, route apply, acl grant)")
	if err != nil {
		return wire.ApplyResult{}, err
	}
	return api.ApplyRegistry(ctx, req)
}

// RevokeACL implements Platform.
func (c *AWS) RevokeACL(ctx context.Context, req wire.ACLRevokeRequest) (registry.Change, error) {
	api, err := c.api("acl revoke")
	if err != nil {
		return registry.Change{}, err
	}
	return api.RevokeACL(ctx, req)
}

// CreateKey implements Platform.
func (c *AWS) CreateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error) {
	api, err := c.api("key create")
	if err != nil {
		return wire.KeyResult{}, err
	}
	return api.CreateKey(ctx, req)
}

// RotateKey implements Platform.
func (c *AWS) RotateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error) {
	api, err := c.api("key rotate")
	if err != nil {
		return wire.KeyResult{}, err
	}
	return api.RotateKey(ctx, req)
}

// DeliveryKey implements Platform.
func (c *AWS) DeliveryKey(ctx context.Context, target string) (wire.DeliveryKey, error) {
	api, err := c.api("key delivery")
	if err != nil {
		return wire.DeliveryKey{}, err
	}
	return api.DeliveryKey(ctx, target)
}

// TenantConfig implements Platform.
func (c *AWS) TenantConfig(ctx context.Context, tenant string) ([]byte, error) {
	api, err := c.api("tenant-config")
	if err != nil {
		return nil, err
	}
	return api.TenantConfig(ctx, tenant)
}

// notOnAWS is a local-only resource's error: IAM replaces tenant tokens
// and ingress credentials on aws.
func (c *AWS) notOnAWS(what string, tokens bool) error {
	env := firstNonEmpty(c.target.Env, "<env>")
	if tokens {
		return &NotAvailableError{What: what, Reason: "tenant tokens are a local dispatcher's; on aws IAM replaces them: a tenant calls the control API as its control role snavio-" + env + "-tenant-<tenant> (`snavio tenant create` on aws makes the tenant's roles), set as the profile's role_arn"}
	}
	return &NotAvailableError{What: what, Reason: "ingress credentials are a local dispatcher's; on aws IAM replaces them: producers put commands on the bus as the tenant's emit role snavio-" + env + "-emit-<tenant> (`snavio tenant create` on aws makes it), set as the profile's emit_role_arn"}
}

// IssueToken implements Platform.
func (c *AWS) IssueToken(context.Context, wire.TokenIssueRequest) (wire.TokenIssued, error) {
	return wire.TokenIssued{}, c.notOnAWS("token issue", true)
}

// ListTokens implements Platform.
func (c *AWS) ListTokens(context.Context, string) (wire.TokenList, error) {
	return wire.TokenList{}, c.notOnAWS("token list", true)
}

// RevokeToken implements Platform.
func (c *AWS) RevokeToken(context.Context, string) (wire.TokenRevoked, error) {
	return wire.TokenRevoked{}, c.notOnAWS("token revoke", true)
}

// CreateCredential implements Platform.
func (c *AWS) CreateCredential(context.Context, wire.CredentialCreateRequest) (wire.CredentialCreated, error) {
	return wire.CredentialCreated{}, c.notOnAWS("tenant credentials create", false)
}

// ListCredentials implements Platform.
func (c *AWS) ListCredentials(context.Context, string) (wire.CredentialList, error) {
	return wire.CredentialList{}, c.notOnAWS("tenant credentials list", false)
}

// RevokeCredential implements Platform.
func (c *AWS) RevokeCredential(context.Context, string) (wire.CredentialRevoked, error) {
	return wire.CredentialRevoked{}, c.notOnAWS("tenant credentials revoke", false)
}

// ReadTelemetry implements Platform. On aws a tenant's telemetry is read
// through a temporary queue subscribed to its topic, which must be
// removed after: tail and send --wait use OpenAWSTelemetry, which has
// ReadTelemetry's shape and a Close.
func (c *AWS) ReadTelemetry(context.Context, wire.TelemetryQuery) (wire.TelemetryPage, error) {
	return wire.TelemetryPage{}, notAvailable("reading telemetry through the control API (tail and send --wait read a temporary queue of their own)")
}

// AckTelemetry implements Platform. On aws the tenant's consumer
// acknowledges by deleting from its own queue, which tail never reads.
func (c *AWS) AckTelemetry(context.Context, wire.TelemetryAck) error {
	return notAvailable("tail --ack (on aws the tenant's consumer deletes from its own telemetry queue)")
}

// LatestSnapshot implements Platform.
func (c *AWS) LatestSnapshot(ctx context.Context, kind snapshot.Kind) ([]byte, error) {
	api, err := c.api("snapshot --latest")
	if err != nil {
		return nil, err
	}
	return api.LatestSnapshot(ctx, kind)
}

// SnapshotPublicKey implements Platform.
func (c *AWS) SnapshotPublicKey(ctx context.Context) (wire.SnapshotPublicKey, error) {
	api, err := c.api("snapshot public-key")
	if err != nil {
		return wire.SnapshotPublicKey{}, err
	}
	return api.SnapshotPublicKey(ctx)
}

// GenerateSnapshot implements Platform.
func (c *AWS) GenerateSnapshot(ctx context.Context) (wire.SnapshotGenerated, error) {
	api, err := c.api("snapshot generate")
	if err != nil {
		return wire.SnapshotGenerated{}, err
	}
	return api.GenerateSnapshot(ctx)
}

// Explain implements Platform.
func (c *AWS) Explain(ctx context.Context, req wire.ExplainRequest) (dispatch.Trace, error) {
	api, err := c.api("send --explain")
	if err != nil {
		return dispatch.Trace{}, err
	}
	return api.Explain(ctx, req)
}

// idKind is the kind of record id names ("route", "acl", ...), as the
// CLI's command groups are named.
func idKind(id registry.ID) string {
	if k := id.Kind(); k.Valid() {
		return string(k)
	}
	return "registry"
}
