package platform

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// The control API's routes, as the local server mounts them.
const (
	pathWhoami       = "/v1/whoami"
	pathRegistry     = "/v1/registry"
	pathRegistryItem = "/v1/registry/item"
	pathHistory      = "/v1/registry/history"
	pathApply        = "/v1/registry/apply"
	pathRevokeACL    = "/v1/registry/acl/revoke"
	pathKeyCreate    = "/v1/keys/create"
	pathKeyRotate    = "/v1/keys/rotate"
	pathDeliveryKeys = "/v1/delivery-keys/"
	pathTenants      = "/v1/tenants/"
	pathTokens       = "/v1/tokens"
	pathCredentials  = "/v1/credentials"
	pathTelemetry    = "/v1/telemetry"
	pathTelemetryAck = "/v1/telemetry/ack"
	pathQueues       = "/v1/queues"
	pathSnapshots    = "/v1/snapshots/"
	pathReplays      = "/v1/replays"
	pathExplain      = "/v1/explain"
)

// Whoami implements Platform.
func (a *Local) Whoami(ctx context.Context) (wire.Whoami, error) {
	var w wire.Whoami
	err := a.do(ctx, http.MethodGet, pathWhoami, nil, nil, &w)
	return w, err
}

// Probe implements Platform.
func (a *Local) Probe(ctx context.Context, path ProbePath, auth bool, now func() time.Time) Probe {
	var req *http.Request
	var err error
	if auth {
		req, err = a.newRequest(ctx, http.MethodGet, string(path), nil, nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, a.endpoint+string(path), nil)
	}
	if err != nil {
		return Probe{Err: err}
	}
	p := Probe{Sent: now()}
	resp, err := a.http.Do(req)
	p.Received = now()
	if err != nil {
		p.Err = err
		return p
	}
	defer func() { _ = resp.Body.Close() }()
	p.Status, p.Date = resp.StatusCode, resp.Header.Get("Date")
	p.Body, p.Err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return p
}

// ListRegistry implements Platform.
func (a *Local) ListRegistry(ctx context.Context, kind registry.Kind, f RegistryFilter) ([]registry.Item, error) {
	q := url.Values{}
	for k, v := range map[string]string{"kind": string(kind), "source": f.Source, "tenant": f.Tenant, "target": f.Target, "command": f.Command} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out wire.RegistryItems
	err := a.do(ctx, http.MethodGet, pathRegistry, q, nil, &out)
	return out.Items, err
}

// GetRegistryItem implements Platform.
func (a *Local) GetRegistryItem(ctx context.Context, id registry.ID) (registry.Item, error) {
	var it registry.Item
	err := a.do(ctx, http.MethodGet, pathRegistryItem, url.Values{"id": {string(id)}}, nil, &it)
	return it, err
}

// DeleteRegistryItem implements Platform.
func (a *Local) DeleteRegistryItem(ctx context.Context, id registry.ID, version int64) (registry.Change, error) {
	var ch registry.Change
	q := url.Values{"id": {string(id)}, "version": {strconv.FormatInt(version, 10)}}
	err := a.do(ctx, http.MethodDelete, pathRegistryItem, q, nil, &ch)
	return ch, err
}

// RegistryHistory implements Platform.
func (a *Local) RegistryHistory(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error) {
	var h wire.RegistryHistory
	err := a.do(ctx, http.MethodGet, pathHistory, url.Values{"id": {string(id)}, "limit": {strconv.Itoa(limit)}}, nil, &h)
	return h.Changes, err
}

// ApplyRegistry implements Platform.
func (a *Local) ApplyRegistry(ctx context.Context, req wire.ApplyRequest) (wire.ApplyResult, error) {
	var res wire.ApplyResult
	err := a.do(ctx, http.MethodPost, pathApply, nil, req, &res)
	return res, err
}

// RevokeACL implements Platform.
func (a *Local) RevokeACL(ctx context.Context, req wire.ACLRevokeRequest) (registry.Change, error) {
	var ch registry.Change
	err := a.do(ctx, http.MethodPost, pathRevokeACL, nil, req, &ch)
	return ch, err
}

// CreateKey implements Platform.
func (a *Local) CreateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error) {
	var res wire.KeyResult
	err := a.do(ctx, http.MethodPost, pathKeyCreate, nil, req, &res)
	return res, err
}

// RotateKey implements Platform.
func (a *Local) RotateKey(ctx context.Context, req wire.KeyRequest) (wire.KeyResult, error) {
	var res wire.KeyResult
	err := a.do(ctx, http.MethodPost, pathKeyRotate, nil, req, &res)
	return res, err
}

// DeliveryKey implements Platform.
func (a *Local) DeliveryKey(ctx context.Context, target string) (wire.DeliveryKey, error) {
	var k wire.DeliveryKey
	err := a.do(ctx, http.MethodGet, pathDeliveryKeys+url.PathEscape(target), nil, nil, &k)
	return k, err
}

// TenantConfig implements Platform.
func (a *Local) TenantConfig(ctx context.Context, tenant string) ([]byte, error) {
	var raw []byte
	err := a.do(ctx, http.MethodGet, pathTenants+url.PathEscape(tenant)+"/config", nil, nil, &raw)
	return raw, err
}

func tenantQuery(tenant string) url.Values {
	if tenant == "" {
		return nil
	}
	return url.Values{"tenant": {tenant}}
}

// IssueToken implements Platform.
func (a *Local) IssueToken(ctx context.Context, req wire.TokenIssueRequest) (wire.TokenIssued, error) {
	var out wire.TokenIssued
	err := a.do(ctx, http.MethodPost, pathTokens, nil, req, &out)
	return out, err
}

// ListTokens implements Platform.
func (a *Local) ListTokens(ctx context.Context, tenant string) (wire.TokenList, error) {
	var out wire.TokenList
	err := a.do(ctx, http.MethodGet, pathTokens, tenantQuery(tenant), nil, &out)
	return out, err
}

// RevokeToken implements Platform.
func (a *Local) RevokeToken(ctx context.Context, id string) (wire.TokenRevoked, error) {
	var out wire.TokenRevoked
	err := a.do(ctx, http.MethodDelete, pathTokens+"/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// CreateCredential implements Platform.
func (a *Local) CreateCredential(ctx context.Context, req wire.CredentialCreateRequest) (wire.CredentialCreated, error) {
	var out wire.CredentialCreated
	err := a.do(ctx, http.MethodPost, pathCredentials, nil, req, &out)
	return out, err
}

// ListCredentials implements Platform.
func (a *Local) ListCredentials(ctx context.Context, tenant string) (wire.CredentialList, error) {
	var out wire.CredentialList
	err := a.do(ctx, http.MethodGet, pathCredentials, tenantQuery(tenant), nil, &out)
	return out, err
}

// RevokeCredential implements Platform.
func (a *Local) RevokeCredential(ctx context.Context, accessKeyID string) (wire.CredentialRevoked, error) {
	var out wire.CredentialRevoked
	err := a.do(ctx, http.MethodDelete, pathCredentials+"/"+url.PathEscape(accessKeyID), nil, nil, &out)
	return out, err
}

// ReadTelemetry implements Platform.
func (a *Local) ReadTelemetry(ctx context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error) {
	var p wire.TelemetryPage
	err := a.do(ctx, http.MethodGet, pathTelemetry, q.Values(), nil, &p)
	return p, err
}

// AckTelemetry implements Platform.
func (a *Local) AckTelemetry(ctx context.Context, ack wire.TelemetryAck) error {
	return a.do(ctx, http.MethodPost, pathTelemetryAck, nil, ack, nil)
}

func queuePath(name string, rest string) string {
	return pathQueues + "/" + url.PathEscape(name) + rest
}

// ListQueues implements Platform.
func (a *Local) ListQueues(ctx context.Context, after string, limit int) (wire.QueueList, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	var out wire.QueueList
	err := a.do(ctx, http.MethodGet, pathQueues, q, nil, &out)
	return out, err
}

// GetQueue implements Platform.
func (a *Local) GetQueue(ctx context.Context, name string) (wire.QueueInfo, error) {
	var out wire.QueueInfo
	err := a.do(ctx, http.MethodGet, queuePath(name, ""), nil, nil, &out)
	return out, err
}

// CreateQueue implements Platform.
func (a *Local) CreateQueue(ctx context.Context, req wire.QueueCreateRequest) (wire.QueueCreateResult, error) {
	var out wire.QueueCreateResult
	err := a.do(ctx, http.MethodPost, pathQueues, nil, req, &out)
	return out, err
}

// ReceiveMessages implements Platform.
func (a *Local) ReceiveMessages(ctx context.Context, queue string, req wire.QueueReceiveRequest) (wire.QueueReceived, error) {
	var out wire.QueueReceived
	err := a.do(ctx, http.MethodPost, queuePath(queue, "/receive"), nil, req, &out)
	return out, err
}

// DeleteMessages implements Platform.
func (a *Local) DeleteMessages(ctx context.Context, queue string, req wire.QueueDeleteRequest) (wire.QueueDeleteResult, error) {
	var out wire.QueueDeleteResult
	err := a.do(ctx, http.MethodPost, queuePath(queue, "/messages/delete"), nil, req, &out)
	return out, err
}

// PurgeQueue implements Platform.
func (a *Local) PurgeQueue(ctx context.Context, queue string) (wire.QueuePurgeResult, error) {
	var out wire.QueuePurgeResult
	err := a.do(ctx, http.MethodPost, queuePath(queue, "/purge"), nil, nil, &out)
	return out, err
}

// LatestSnapshot implements Platform.
func (a *Local) LatestSnapshot(ctx context.Context, kind snapshot.Kind) ([]byte, error) {
	var raw []byte
	err := a.do(ctx, http.MethodGet, pathSnapshots+url.PathEscape(string(kind))+"/latest", nil, nil, &raw)
	return raw, err
}

// SnapshotPublicKey implements Platform.
func (a *Local) SnapshotPublicKey(ctx context.Context) (wire.SnapshotPublicKey, error) {
	var pk wire.SnapshotPublicKey
	err := a.do(ctx, http.MethodGet, pathSnapshots+"public-key", nil, nil, &pk)
	return pk, err
}

// GenerateSnapshot implements Platform.
func (a *Local) GenerateSnapshot(ctx context.Context) (wire.SnapshotGenerated, error) {
	var g wire.SnapshotGenerated
	err := a.do(ctx, http.MethodPost, pathSnapshots+"generate", nil, nil, &g)
	return g, err
}

// PlanReplay implements Platform.
func (a *Local) PlanReplay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayPlanResponse, error) {
	var pr wire.ReplayPlanResponse
	err := a.do(ctx, http.MethodPost, pathReplays+"/plan", nil, req, &pr)
	return pr, err
}

// StartReplay implements Platform.
func (a *Local) StartReplay(ctx context.Context, req wire.ReplayRequest) (ReplayStream, error) {
	return a.stream(ctx, pathReplays, req)
}

// ResumeReplay implements Platform.
func (a *Local) ResumeReplay(ctx context.Context, id string, req wire.ReplayResumeRequest) (ReplayStream, error) {
	return a.stream(ctx, pathReplays+"/"+url.PathEscape(id)+"/resume", req)
}

// ListReplays implements Platform.
func (a *Local) ListReplays(ctx context.Context) ([]wire.ReplayAudit, error) {
	var l wire.ReplayList
	err := a.do(ctx, http.MethodGet, pathReplays, nil, nil, &l)
	return l.Replays, err
}

// GetReplay implements Platform.
func (a *Local) GetReplay(ctx context.Context, id string) (wire.ReplayAudit, error) {
	var au wire.ReplayAudit
	err := a.do(ctx, http.MethodGet, pathReplays+"/"+url.PathEscape(id), nil, nil, &au)
	return au, err
}

// Explain implements Platform.
func (a *Local) Explain(ctx context.Context, req wire.ExplainRequest) (dispatch.Trace, error) {
	var tr dispatch.Trace
	err := a.do(ctx, http.MethodPost, pathExplain, nil, req, &tr)
	return tr, err
}

// maxUpdateLine bounds one NDJSON replay update.
const maxUpdateLine = 1 << 20

// stream posts body to path and returns the NDJSON updates of the
// answer. The request has no timeout: a replay runs as long as it takes,
// and ctx (Ctrl-C) ends it.
func (a *Local) stream(ctx context.Context, path string, body any) (ReplayStream, error) {
	req, err := a.newRequest(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return nil, err
	}
	hc := *a.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, a.unreachable(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, a.decodeError(resp, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxUpdateLine)
	return &replayStream{client: a, body: resp.Body, sc: sc}, nil
}

// replayStream reads NDJSON updates: io.EOF at the end of the answer, an
// *UnreachableError when the connection broke first.
type replayStream struct {
	client *Local
	body   io.ReadCloser
	sc     *bufio.Scanner
}

func (s *replayStream) Next() (wire.ReplayUpdate, error) {
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return wire.ReplayUpdate{}, s.client.unreachable(err)
		}
		return wire.ReplayUpdate{}, io.EOF
	}
	var u wire.ReplayUpdate
	if err := json.Unmarshal(s.sc.Bytes(), &u); err != nil {
		return wire.ReplayUpdate{}, fmt.Errorf("the server's replay update is not the JSON this snavio expects (%v); check that snavio and the server are the same version", err)
	}
	return u, nil
}

func (s *replayStream) Close() error { return s.body.Close() }
