package lambda

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

const controlAccount = "123456789012"

// controlFixture is the control function on the fixture's tables
// (DynamoDB Local) and a snapshot bucket (gofakes3), every client
// counting its calls in f.c.
type controlFixture struct {
	*fixture
	ctl    *Control
	names  stack.Names
	bucket string
}

func newControlFixture(t *testing.T) *controlFixture {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	s3emu, bucket := snapshotBucket(t)
	store := f.store
	store.ClientOptions = append(slices.Clip(store.ClientOptions), f.c.DynamoDB)
	store.S3Options = append(slices.Clip(s3emu.ClientOptions()), f.c.S3)
	store.SnapshotBucket, store.AccountID = bucket, controlAccount
	names := stack.Names{Env: f.env}
	ctl, err := NewControl(ctx, ControlConfig{Store: store, Roles: names, SnapshotKey: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize)),
		DeliveryKey: bytes.Repeat([]byte{7}, provenance.MinMasterLen), MetricsOut: io.Discard, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control init: calls %s", f.c.Take())
	return &controlFixture{fixture: f, ctl: ctl, names: names, bucket: bucket}
}

// snapshotBucket makes a bucket on gofakes3.
func snapshotBucket(t *testing.T) (*awstest.S3, string) {
	t.Helper()
	s3emu := emu.S3()
	bucket := s3emu.NewBucketName()
	if _, err := s3.NewFromConfig(s3emu.Config(), s3emu.ClientOptions()...).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return s3emu, bucket
}

// urlEvent is a Function URL event as Lambda hands it over, signed by a
// session of role (none: no authorizer).
func urlEvent(method, path, query, body, role string) events.LambdaFunctionURLRequest {
	ev := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: path, RawQueryString: query, Body: body,
		Headers: map[string]string{"content-type": "application/json", "host": "x.lambda-url.us-east-1.on.aws"}}
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = path
	ev.RequestContext.DomainName = "x.lambda-url.us-east-1.on.aws"
	ev.RequestContext.RequestID = "req"
	if role != "" {
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			AccountID: controlAccount, CallerID: "AROAEXAMPLE:alice", UserARN: "arn:aws:sts::" + controlAccount + ":assumed-role/" + role + "/alice"}}
	}
	return ev
}

func (c *controlFixture) tenantRole(t *testing.T, tenant string) string {
	t.Helper()
	r, err := c.names.TenantRole(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// do serves ev and decodes a JSON answer into out (when not nil); it
// returns the response.
func (c *controlFixture) do(t *testing.T, ev events.LambdaFunctionURLRequest, want int, out any) events.LambdaFunctionURLResponse {
	t.Helper()
	resp, err := c.ctl.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s %s: Handle returned %v; it must always answer", ev.RequestContext.HTTP.Method, ev.RawPath, err)
	}
	body := resp.Body
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s?%s: %d %s; want %d", ev.RequestContext.HTTP.Method, ev.RawPath, ev.RawQueryString, resp.StatusCode, body, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatalf("%s %s: %v in %s", ev.RequestContext.HTTP.Method, ev.RawPath, err, body)
		}
	}
	return resp
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestControlFunctionURL runs the control API behind its Function URL
// end to end on DynamoDB Local and gofakes3: the operator registers a
// route and lists it, tenants read only their own records, an unknown
// role is refused, a left-out resource answers 501, a malformed event
// 400, and snapshots, delivery keys and explain work on AWS's stores.
func TestControlFunctionURL(t *testing.T) {
	c := newControlFixture(t)
	op := c.names.OperatorRole()
	acme, globex := c.tenantRole(t, "acme"), c.tenantRole(t, "globex")

	var who wire.Whoami
	c.do(t, urlEvent("GET", "/v1/whoami", "", "", acme), 200, &who)
	if who.Principal != "tenant:acme" || who.Operator {
		t.Fatalf("whoami as %s: %+v", acme, who)
	}
	c.do(t, urlEvent("GET", "/v1/whoami", "", "", op), 200, &who)
	if !who.Operator {
		t.Fatalf("whoami as %s: %+v", op, who)
	}

	// The operator registers a route; a tenant may not.
	route := dispatchtest.RegistryRoute("invoices", "issue")
	route.QueueARN, route.DLQARN = c.plainARN, c.plainARN+"-dlq"
	put := mustJSON(t, wire.RegistryPutRequest{Item: registry.Item{Route: &route}})
	c.c.Take()
	c.do(t, urlEvent("PUT", "/v1/registry/item", "", put, acme), 403, nil)
	if calls := c.c.Take(); calls.Total() != 0 {
		t.Errorf("a refused tenant write made %s; want none", calls)
	}
	c.do(t, urlEvent("PUT", "/v1/registry/item", "", put, op), 200, nil)
	t.Logf("PUT /v1/registry/item (a route): calls %s", c.c.Take())
	var routes wire.RegistryItems
	c.do(t, urlEvent("GET", "/v1/registry", "kind=route", "", op), 200, &routes)
	listCalls := c.c.Take()
	t.Logf("GET /v1/registry?kind=route (%d routes): calls %s", len(routes.Items), listCalls)
	if !slices.ContainsFunc(routes.Items, func(it registry.Item) bool { return it.Route != nil && it.Route.Target == "invoices" }) {
		t.Fatalf("the registered route is not listed: %+v", routes.Items)
	}
	if listCalls.Of("DynamoDB") != 1 || listCalls.Total() != 1 {
		t.Errorf("a route list made %s; want one DynamoDB Scan", listCalls)
	}

	// A tenant reads only its own ACLs; naming another's is 403.
	acl := dispatchtest.RegistryACL("globex/shop", "invoices", "issue")
	c.do(t, urlEvent("PUT", "/v1/registry/item", "", mustJSON(t, wire.RegistryPutRequest{Item: registry.Item{ACL: &acl}}), op), 200, nil)
	for tenant, role := range map[string]string{"acme": acme, "globex": globex} {
		var acls wire.RegistryItems
		c.do(t, urlEvent("GET", "/v1/registry", "kind=acl", "", role), 200, &acls)
		if len(acls.Items) == 0 {
			t.Fatalf("%s reads no ACL", tenant)
		}
		for _, it := range acls.Items {
			if !strings.HasPrefix(it.ACL.Source, tenant+"/") {
				t.Errorf("%s reads another tenant's ACL %+v", tenant, it.ACL)
			}
		}
	}
	c.do(t, urlEvent("GET", "/v1/registry", "kind=acl&tenant=acme", "", globex), 403, nil)

	// Unknown roles, other envs, IAM users and a missing authorizer.
	for _, ev := range []events.LambdaFunctionURLRequest{
		urlEvent("GET", "/v1/registry", "", "", "admin"),
		urlEvent("GET", "/v1/registry", "", "", "snavio-other-operator"),
		urlEvent("GET", "/v1/registry", "", "", c.names.FunctionRole(stack.FnControl)),
	} {
		var e server.APIError
		c.do(t, ev, 403, &e)
		if !strings.Contains(e.Fix, op) {
			t.Errorf("the 403's fix %q does not name the operator role", e.Fix)
		}
	}
	c.do(t, urlEvent("GET", "/v1/registry", "", "", ""), 401, nil)

	// Left out on AWS: 501 with the code and what to use instead.
	for _, p := range []struct{ method, path string }{{"GET", "/v1/tokens"}, {"POST", "/v1/credentials"}, {"GET", "/v1/telemetry"}, {"GET", "/v1/queues"}, {"GET", "/v1/replays"}, {"GET", "/v1/archive"}} {
		var e server.APIError
		c.do(t, urlEvent(p.method, p.path, "", "", acme), http.StatusNotImplemented, &e)
		if e.Code != controlapi.CodeNotOnAWS || e.Fix == "" {
			t.Errorf("%s %s: %+v", p.method, p.path, e)
		}
	}

	// Malformed events: 400, never a panic or a Lambda error.
	bad := urlEvent("GET", "/v1/whoami", "", "", op)
	bad.RequestContext.HTTP.Method = ""
	c.do(t, bad, 400, nil)
	bad = urlEvent("POST", "/v1/explain", "", "not base64!", op)
	bad.IsBase64Encoded = true
	c.do(t, bad, 400, nil)
	c.do(t, urlEvent("GET", "v1/whoami", "", "", op), 400, nil)

	// Snapshots: the operator generates (signed with the snapshot key),
	// a tenant lists versions but may not read a document.
	var gen wire.SnapshotGenerated
	c.c.Take()
	c.do(t, urlEvent("POST", "/v1/snapshots/generate", "", "", op), 200, &gen)
	t.Logf("POST /v1/snapshots/generate: calls %s", c.c.Take())
	var list wire.SnapshotList
	c.do(t, urlEvent("GET", "/v1/snapshots", "", "", acme), 200, &list)
	if len(list.Documents) == 0 || list.Documents[0].Latest != gen.VersionID {
		t.Fatalf("snapshot list %+v; want the generated %s", list, gen.VersionID)
	}
	c.do(t, urlEvent("GET", "/v1/snapshots/full/latest", "", "", acme), 403, nil)
	resp := c.do(t, urlEvent("GET", "/v1/snapshots/full/latest", "", "", op), 200, nil)
	if resp.Headers[strings.ToLower(wire.SnapshotVersionHeader)] != gen.VersionID {
		t.Errorf("latest full snapshot headers %v; want version %s", resp.Headers, gen.VersionID)
	}

	// Delivery keys (operator) and explain (a tenant, its own source).
	c.do(t, urlEvent("GET", "/v1/delivery-keys/invoices", "", "", op), 200, nil)
	c.c.Take()
	var tr dispatch.Trace
	ev := c.event(t, "0f8fad5b-d9cb-469f-a165-000000000300", "mailer", "send")
	explain := mustJSON(t, wire.ExplainRequest{Source: source, Detail: string(ev.Detail)})
	c.do(t, urlEvent("POST", "/v1/explain", "", explain, acme), 200, &tr)
	t.Logf("first explain (loads the explain dispatcher): calls %s", c.c.Take())
	if tr.Outcome != dispatch.Delivered {
		t.Fatalf("explain: %+v", tr)
	}
	c.do(t, urlEvent("POST", "/v1/explain", "", explain, globex), 403, nil)
	c.do(t, urlEvent("POST", "/v1/explain", "", explain, acme), 200, &tr)
	if calls := c.c.Take(); calls.Total() != 0 {
		t.Errorf("a warm explain made %s; want none", calls)
	}

	// The replayer (a replay the CLI runs): the operator records an audit
	// in the flow table and has an archived command verified and
	// re-signed; a tenant may do neither.
	const runner, id = "3b241101-e2bb-4255-8caf-4136c566a962", "7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3a"
	audit := wire.ReplayAuditWrite{ReplayClaim: wire.ReplayClaim{Runner: runner, ClaimSeconds: 300},
		Audit: wire.ReplayAudit{ID: id, Origin: wire.ReplayOriginArchive, Reason: "incident 1", Dedupe: wire.DedupeKeepID, Status: wire.ReplayRunning, StartedAt: c.clk.Now()}}
	c.do(t, urlEvent("POST", "/v1/replayer/audits", "", mustJSON(t, audit), acme), 403, nil)
	c.c.Take()
	c.do(t, urlEvent("POST", "/v1/replayer/audits", "", mustJSON(t, audit), op), 204, nil)
	t.Logf("POST /v1/replayer/audits: calls %s", c.c.Take())
	record := wire.ReplayRecord{Source: source, DetailType: envelope.EventType, Detail: string(ev.Detail), ReceivedAt: c.clk.Now()}
	var verdicts wire.ReplayVerifyResponse
	c.do(t, urlEvent("POST", "/v1/replayer/archive/verify", "", mustJSON(t, wire.ReplayVerifyRequest{Records: []wire.ReplayRecord{record}}), op), 200, &verdicts)
	if len(verdicts.Refusals) != 1 || verdicts.Refusals[0] != "" {
		t.Errorf("verify: %+v, want the command accepted", verdicts)
	}
	var signed wire.ReplaySignResponse
	c.c.Take()
	c.do(t, urlEvent("POST", "/v1/replayer/sign", "", mustJSON(t, wire.ReplaySignRequest{ReplayID: id, Runner: runner, Records: []wire.ReplayRecord{record}}), op), 200, &signed)
	t.Logf("POST /v1/replayer/sign (1 command): calls %s", c.c.Take())
	if len(signed.Results) != 1 || signed.Results[0].Refusal != "" || !strings.Contains(signed.Results[0].Detail, id) {
		t.Errorf("sign: %+v, want the command re-signed for replay %s", signed, id)
	}
	var got wire.ReplayAudit
	c.do(t, urlEvent("GET", "/v1/replayer/audits/"+id, "", "", op), 200, &got)
	if got.Reason != "incident 1" || got.Status != wire.ReplayRunning {
		t.Errorf("audit %+v", got)
	}
}

// TestControlConfigFromEnvReportsEverything: every missing variable is
// named at once.
func TestControlConfigFromEnvReportsEverything(t *testing.T) {
	_, err := ControlConfigFromEnv(func(string) string { return "" }, aws.Config{})
	if err == nil {
		t.Fatal("an empty environment was accepted")
	}
	for _, want := range []string{EnvFunction, EnvAccountID, EnvSnapshotBucket, EnvSnapshotSigningKey, EnvDeliveryKey, "env", "region"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
}

// TestBootstrapBinaryRunsControl builds cmd/snavio-lambda and runs it with
// SNAVIO_FUNCTION=control, as Lambda would: the bootstrap dispatches to
// the control function, maps the caller by the stack's role names, and
// answers a Function URL event.
func TestBootstrapBinaryRunsControl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap binary")
	}
	bin := buildBinary(t, "github.com/snavio/snavio/cmd/snavio-lambda")
	env := emu.UniqueName()
	names := stack.Names{Env: env}
	ev, err := json.Marshal(urlEvent("GET", "/v1/whoami", "", "", names.OperatorRole()))
	if err != nil {
		t.Fatal(err)
	}
	vars := []string{
		EnvFunction + "=" + FunctionControl, EnvEnv + "=" + env, EnvAccountID + "=" + controlAccount, EnvSnapshotBucket + "=snavio-test-snapshots",
		EnvSnapshotSigningKey + "=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, ed25519.SeedSize)),
		EnvDeliveryKey + "=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, provenance.MinMasterLen)),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=snavioTest", "AWS_SECRET_ACCESS_KEY=snavioTest", "AWS_EC2_METADATA_DISABLED=true",
		"HOME=" + t.TempDir(),
	}
	got, _ := runBootstrap(t, bin, vars, ev, nil)
	answer, ok := strings.CutPrefix(got, "response: ")
	if !ok {
		t.Fatalf("answer %q, want a response", got)
	}
	var resp events.LambdaFunctionURLResponse
	var who wire.Whoami
	if err := json.Unmarshal([]byte(answer), &resp); err != nil || resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &who) != nil || !who.Operator {
		t.Fatalf("answer %s (%v); want 200 with the operator", answer, err)
	}
}
