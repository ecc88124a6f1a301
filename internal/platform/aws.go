package platform

import (
	"context"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// NotAvailableError is an operation the platform of the profile cannot do
// yet: the aws platform's control operations come with the AWS host of
// the control API. What names the operation as the CLI spells it.
type NotAvailableError struct {
	What string
}

func (e *NotAvailableError) Error() string { return "not available on aws yet: " + e.What }

// AWS is the platform of an aws profile. Commands are put on the
// EventBridge bus through Bus (NewBus); the queue operations act on SQS
// (aws_queues.go); every other control operation returns a
// *NotAvailableError until the control API has its AWS host.
type AWS struct {
	target Target
	// sdk is the SDK configuration and clients, built on first use
	// (aws_queues.go).
	sdk awsSDK
}

var _ Platform = (*AWS)(nil)

func notAvailable(what string) error { return &NotAvailableError{What: what} }

// Target implements Platform.
func (c *AWS) Target() Target { return c.target }

// Whoami implements Platform.
func (c *AWS) Whoami(context.Context) (wire.Whoami, error) {
	return wire.Whoami{}, notAvailable("whoami")
}

// CheckCredential implements Platform.
func (c *AWS) CheckCredential() error { return notAvailable("control-API credentials") }

// Probe implements Platform.
func (c *AWS) Probe(_ context.Context, path ProbePath, _ bool, _ func() time.Time) Probe {
	return Probe{Err: notAvailable("probe " + string(path))}
}

// ListRegistry implements Platform: "route list", "acl list", ...
func (c *AWS) ListRegistry(_ context.Context, kind registry.Kind, _ RegistryFilter) ([]registry.Item, error) {
	return nil, notAvailable(string(kind) + " list")
}

// GetRegistryItem implements Platform.
func (c *AWS) GetRegistryItem(_ context.Context, id registry.ID) (registry.Item, error) {
	return registry.Item{}, notAvailable(idKind(id) + " get")
}

// DeleteRegistryItem implements Platform.
func (c *AWS) DeleteRegistryItem(_ context.Context, id registry.ID, _ int64) (registry.Change, error) {
	return registry.Change{}, notAvailable(idKind(id) + " delete")
}

// RegistryHistory implements Platform.
func (c *AWS) RegistryHistory(_ context.Context, id registry.ID, _ int) ([]registry.Change, error) {
	return nil, notAvailable(idKind(id) + " history")
}

// ApplyRegistry implements Platform.
func (c *AWS) ApplyRegistry(context.Context, wire.ApplyRequest) (wire.ApplyResult, error) {
	return wire.ApplyResult{}, notAvailable("registry apply (route register, route apply, acl grant)")
}

// RevokeACL implements Platform.
func (c *AWS) RevokeACL(context.Context, wire.ACLRevokeRequest) (registry.Change, error) {
	return registry.Change{}, notAvailable("acl revoke")
}

// CreateKey implements Platform.
func (c *AWS) CreateKey(context.Context, wire.KeyRequest) (wire.KeyResult, error) {
	return wire.KeyResult{}, notAvailable("key create")
}

// RotateKey implements Platform.
func (c *AWS) RotateKey(context.Context, wire.KeyRequest) (wire.KeyResult, error) {
	return wire.KeyResult{}, notAvailable("key rotate")
}

// DeliveryKey implements Platform.
func (c *AWS) DeliveryKey(context.Context, string) (wire.DeliveryKey, error) {
	return wire.DeliveryKey{}, notAvailable("key delivery")
}

// TenantConfig implements Platform.
func (c *AWS) TenantConfig(context.Context, string) ([]byte, error) {
	return nil, notAvailable("tenant-config")
}

// IssueToken implements Platform.
func (c *AWS) IssueToken(context.Context, wire.TokenIssueRequest) (wire.TokenIssued, error) {
	return wire.TokenIssued{}, notAvailable("token issue")
}

// ListTokens implements Platform.
func (c *AWS) ListTokens(context.Context, string) (wire.TokenList, error) {
	return wire.TokenList{}, notAvailable("token list")
}

// RevokeToken implements Platform.
func (c *AWS) RevokeToken(context.Context, string) (wire.TokenRevoked, error) {
	return wire.TokenRevoked{}, notAvailable("token revoke")
}

// CreateCredential implements Platform.
func (c *AWS) CreateCredential(context.Context, wire.CredentialCreateRequest) (wire.CredentialCreated, error) {
	return wire.CredentialCreated{}, notAvailable("tenant credentials create")
}

// ListCredentials implements Platform.
func (c *AWS) ListCredentials(context.Context, string) (wire.CredentialList, error) {
	return wire.CredentialList{}, notAvailable("tenant credentials list")
}

// RevokeCredential implements Platform.
func (c *AWS) RevokeCredential(context.Context, string) (wire.CredentialRevoked, error) {
	return wire.CredentialRevoked{}, notAvailable("tenant credentials revoke")
}

// ReadTelemetry implements Platform.
func (c *AWS) ReadTelemetry(context.Context, wire.TelemetryQuery) (wire.TelemetryPage, error) {
	return wire.TelemetryPage{}, notAvailable("telemetry (tail, send --wait)")
}

// AckTelemetry implements Platform.
func (c *AWS) AckTelemetry(context.Context, wire.TelemetryAck) error {
	return notAvailable("tail --ack")
}

// LatestSnapshot implements Platform.
func (c *AWS) LatestSnapshot(context.Context, snapshot.Kind) ([]byte, error) {
	return nil, notAvailable("snapshot --latest")
}

// SnapshotPublicKey implements Platform.
func (c *AWS) SnapshotPublicKey(context.Context) (wire.SnapshotPublicKey, error) {
	return wire.SnapshotPublicKey{}, notAvailable("snapshot public-key")
}

// GenerateSnapshot implements Platform.
func (c *AWS) GenerateSnapshot(context.Context) (wire.SnapshotGenerated, error) {
	return wire.SnapshotGenerated{}, notAvailable("snapshot generate")
}

// PlanReplay implements Platform.
func (c *AWS) PlanReplay(context.Context, wire.ReplayRequest) (wire.ReplayPlanResponse, error) {
	return wire.ReplayPlanResponse{}, notAvailable("replay --dry-run")
}

// StartReplay implements Platform.
func (c *AWS) StartReplay(context.Context, wire.ReplayRequest) (ReplayStream, error) {
	return nil, notAvailable("replay")
}

// ResumeReplay implements Platform.
func (c *AWS) ResumeReplay(context.Context, string, wire.ReplayResumeRequest) (ReplayStream, error) {
	return nil, notAvailable("replay --resume")
}

// ListReplays implements Platform.
func (c *AWS) ListReplays(context.Context) ([]wire.ReplayAudit, error) {
	return nil, notAvailable("replay list")
}

// GetReplay implements Platform.
func (c *AWS) GetReplay(context.Context, string) (wire.ReplayAudit, error) {
	return wire.ReplayAudit{}, notAvailable("replay show")
}

// Explain implements Platform.
func (c *AWS) Explain(context.Context, wire.ExplainRequest) (dispatch.Trace, error) {
	return dispatch.Trace{}, notAvailable("send --explain")
}

// idKind is the kind of record id names ("route", "acl", ...), as the
// CLI's command groups are named.
func idKind(id registry.ID) string {
	if k := id.Kind(); k.Valid() {
		return string(k)
	}
	return "registry"
}
