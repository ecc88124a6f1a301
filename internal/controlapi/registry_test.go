package controlapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type registryEnv struct {
	srv *httptest.Server
	clk *clock.Fake
	reg *memstore.Registry
}

func newRegistryEnv(t *testing.T) *registryEnv {
	clk := clock.NewFake(t0)
	reg := memstore.NewRegistry()
	api, err := NewRegistryAPI(RegistryOptions{Registry: reg, Clock: clk, Auth: ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(servertest.OperatorAndAcme().Handler(api.Handler()))
	t.Cleanup(srv.Close)
	return &registryEnv{srv: srv, clk: clk, reg: reg}
}

func (e *registryEnv) do(t *testing.T, token, method, path string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func route(target, command string) registry.Item {
	r := dispatchtest.RegistryRoute(target, command)
	return registry.Item{Route: &r}
}

func TestAuthorization(t *testing.T) {
	e := newRegistryEnv(t)
	var er map[string]string
	if st := e.do(t, "", "GET", "/v1/registry", nil, &er); st != 401 || er["fix"] == "" {
		t.Fatalf("no token: %d %v", st, er)
	}
	if st := e.do(t, "acme", "PUT", "/v1/registry/item", wire.RegistryPutRequest{Item: route("mailer", "send")}, &er); st != 403 {
		t.Fatalf("tenant write: %d", st)
	}
	if st := e.do(t, "acme", "GET", "/v1/registry", nil, &wire.RegistryItems{}); st != 200 {
		t.Fatalf("tenant read: %d", st)
	}
	if st := e.do(t, "acme", "GET", "/v1/tenants/globex/config", nil, &er); st != 403 {
		t.Fatalf("tenant reading another tenant's keys: %d", st)
	}
}

func TestPutGetConflictAndHistory(t *testing.T) {
	e := newRegistryEnv(t)
	var ch registry.Change
	if st := e.do(t, "op", "PUT", "/v1/registry/item", wire.RegistryPutRequest{Item: route("mailer", "send")}, &ch); st != 200 || ch.Version != 1 || ch.Who != "operator" {
		t.Fatalf("create: %d %+v", st, ch)
	}
	var er map[string]string
	if st := e.do(t, "op", "PUT", "/v1/registry/item", wire.RegistryPutRequest{Item: route("mailer", "send")}, &er); st != 409 {
		t.Fatalf("create over an existing version: %d %v", st, er)
	}
	bad := route("mailer", "other")
	bad.Route.DLQARN = ""
	if st := e.do(t, "op", "PUT", "/v1/registry/item", wire.RegistryPutRequest{Item: bad}, &er); st != 400 || !strings.Contains(er["error"], "dlq") {
		t.Fatalf("invalid route: %d %v", st, er)
	}
	id := url.QueryEscape(string(registry.RouteID("mailer", "send")))
	var got registry.Item
	if st := e.do(t, "acme", "GET", "/v1/registry/item?id="+id, nil, &got); st != 200 || got.Route == nil || got.Route.Version != 1 {
		t.Fatalf("get: %d %+v", st, got)
	}
	var h wire.RegistryHistory
	if st := e.do(t, "op", "GET", "/v1/registry/history?id="+id, nil, &h); st != 200 || len(h.Changes) != 1 {
		t.Fatalf("history: %d %+v", st, h)
	}
	if st := e.do(t, "op", "DELETE", "/v1/registry/item?id="+id+"&version=1", nil, &ch); st != 200 || ch.Op != registry.OpDelete {
		t.Fatalf("delete: %d %+v", st, ch)
	}
	if st := e.do(t, "op", "GET", "/v1/registry/item?id="+id, nil, &er); st != 404 {
		t.Fatalf("get after delete: %d", st)
	}
	if st := e.do(t, "op", "GET", "/v1/registry/item?id=nonsense", nil, &er); st != 400 {
		t.Fatalf("bad id: %d", st)
	}
}

const file = `kind: route
target: mailer
command: send
queue: arn:aws:sqs:eu-west-1:123456789012:mailer-commands
dlq: arn:aws:sqs:eu-west-1:123456789012:mailer-dlq
---
kind: acl
source: acme/billing
target: mailer
command: send
`

func TestApplyDryRunIdempotentAndPrune(t *testing.T) {
	e := newRegistryEnv(t)
	its, err := spec.Parse("f", strings.NewReader(file), t0)
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ApplyResult
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: its, DryRun: true}, &res); st != 200 || res.Plan.Count(spec.Create) != 2 || len(res.Applied) != 0 {
		t.Fatalf("dry run: %d %+v", st, res)
	}
	if d, _ := e.reg.Load(t.Context(), t0); d.Len() != 0 {
		t.Fatal("a dry run wrote")
	}
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: its}, &res); st != 200 || len(res.Applied) != 2 {
		t.Fatalf("apply: %d %+v", st, res)
	}
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: its}, &res); st != 200 || res.Plan.Pending() || len(res.Applied) != 0 {
		t.Fatalf("second apply changed something: %+v", res)
	}
	// Prune: the file without its ACL deletes the ACL.
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: its[:1], Prune: true}, &res); st != 200 || res.Plan.Count(spec.Delete) != 1 || len(res.Applied) != 1 {
		t.Fatalf("prune: %d %+v", st, res)
	}
	var er map[string]string
	if st := e.do(t, "op", "POST", "/v1/registry/apply", map[string]any{"items": its, "bogus": 1}, &er); st != 400 {
		t.Fatalf("unknown request field: %d", st)
	}
}

func TestRevokeKeepsTheAuditRecord(t *testing.T) {
	e := newRegistryEnv(t)
	acl := dispatchtest.RegistryACL("acme/billing", "mailer", "send")
	if _, err := e.reg.Put(t.Context(), registry.Actor{Who: "t", At: t0}, registry.Item{ACL: &acl}); err != nil {
		t.Fatal(err)
	}
	req := wire.ACLRevokeRequest{Source: "acme/billing", Target: "mailer", Command: "send"}
	var ch registry.Change
	if st := e.do(t, "op", "POST", "/v1/registry/acl/revoke", req, &ch); st != 200 || ch.After == nil || ch.After.ACL.Allow || !ch.After.ACL.RevokedAt.Equal(t0) {
		t.Fatalf("revoke: %d %+v", st, ch)
	}
	if ch.After.ACL.ExpiresAt != t0.Add(10*time.Minute).Unix()+1 {
		t.Fatalf("revoked record kept until %d", ch.After.ACL.ExpiresAt)
	}
	var er map[string]string
	if st := e.do(t, "op", "POST", "/v1/registry/acl/revoke", req, &er); st != 409 {
		t.Fatalf("second revoke: %d", st)
	}
}

func TestKeysAndTenantConfig(t *testing.T) {
	e := newRegistryEnv(t)
	var k wire.KeyResult
	if st := e.do(t, "op", "POST", "/v1/keys/create", wire.KeyRequest{Source: "acme/billing"}, &k); st != 200 || k.VersionID != "hmac-v1" || len(k.Secret) != 32 {
		t.Fatalf("create: %d %+v", st, k)
	}
	var er map[string]string
	if st := e.do(t, "op", "POST", "/v1/keys/create", wire.KeyRequest{Source: "acme/billing"}, &er); st != 409 {
		t.Fatalf("second create: %d", st)
	}
	// Secrets never appear in registry reads.
	var list wire.RegistryItems
	e.do(t, "op", "GET", "/v1/registry?kind=key", nil, &list)
	if len(list.Items) != 1 || list.Items[0].Key.Versions[0].Secret != nil {
		t.Fatalf("registry read shows a secret: %+v", list.Items)
	}
	e.clk.Advance(time.Hour)
	var k2 wire.KeyResult
	if st := e.do(t, "op", "POST", "/v1/keys/rotate", wire.KeyRequest{Source: "acme/billing"}, &k2); st != 200 || k2.VersionID != "hmac-v2" || bytes.Equal(k2.Secret, k.Secret) {
		t.Fatalf("rotate: %d %+v", st, k2)
	}
	var tc keys.TenantConfig
	if st := e.do(t, "acme", "GET", "/v1/tenants/acme/config", nil, &tc); st != 200 || len(tc.Services) != 1 {
		t.Fatalf("tenant config: %d %+v", st, tc)
	}
	svc := tc.Services[0]
	if svc.Current == nil || svc.Current.VersionID != "hmac-v2" || !bytes.Equal(svc.Current.Secret, k2.Secret) || svc.Previous == nil || svc.Previous.VersionID != "hmac-v1" {
		t.Fatalf("service keys = %+v", svc)
	}
	sk, err := tc.SigningKey("acme/billing", e.clk.Now())
	if err != nil || sk.VersionID() != "hmac-v2" {
		t.Fatalf("signing key: %v %v", sk, err)
	}
}

// A rotation keeps every version whose successor activated within the
// overlap plus the key history (the archive's retention), so a replay can
// verify an archived command again; older ones go, and so do the oldest
// beyond registry.MaxKeyVersions.
func TestRotationKeepsKeyHistory(t *testing.T) {
	e := newRegistryEnv(t)
	if st := e.do(t, "op", "POST", "/v1/keys/create", wire.KeyRequest{Source: "acme/billing"}, nil); st != 200 {
		t.Fatalf("create: %d", st)
	}
	versions := func() []string {
		it, err := e.reg.Get(t.Context(), registry.KeyID("acme/billing"), e.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range it.Key.Versions {
			ids = append(ids, v.ID)
		}
		return ids
	}
	rotate := func() {
		t.Helper()
		if st := e.do(t, "op", "POST", "/v1/keys/rotate", wire.KeyRequest{Source: "acme/billing"}, nil); st != 200 {
			t.Fatalf("rotate: %d", st)
		}
	}
	e.clk.Advance(time.Hour)
	rotate()
	e.clk.Advance(time.Hour)
	rotate() // v1 is past its acceptance (v3 is current) but within the history
	if got := strings.Join(versions(), ","); got != "hmac-v1,hmac-v2,hmac-v3" {
		t.Fatalf("after two rotations: %s", got)
	}
	// v2 activated 1 h after v1; 7 d overlap + 7 d history after that, v1 goes.
	e.clk.Advance(14*24*time.Hour - time.Hour)
	rotate()
	if got := strings.Join(versions(), ","); got != "hmac-v2,hmac-v3,hmac-v4" {
		t.Fatalf("after the history: %s", got)
	}
	for range registry.MaxKeyVersions {
		e.clk.Advance(time.Minute)
		rotate()
	}
	if got := versions(); len(got) != registry.MaxKeyVersions || got[len(got)-1] != "hmac-v20" {
		t.Fatalf("at the cap: %v", got)
	}
}
