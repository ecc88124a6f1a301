package platform

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform/fnurltest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var t0 = time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)

// The operator's session credentials, as a role session would have them.
const (
	opKey    = "ASIAOPERATOR"
	opSecret = "operator-secret"
	opToken  = "operator-session"
	opARN    = "arn:aws:sts::123456789012:assumed-role/snavio-test-operator/cli"
)

func fnURL(t *testing.T, clk clock.Clock) *fnurltest.Server {
	t.Helper()
	fn, err := fnurltest.New(fnurltest.Options{Region: "eu-west-1", Env: "test", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Close)
	fn.AddKey(opKey, opSecret, opToken, opARN)
	return fn
}

// stsTap serves kumo's STS behind a tap that registers the credentials
// it issues with fn.
func stsTap(t *testing.T, fn *fnurltest.Server) *fnurltest.STSTap {
	t.Helper()
	k := kumo.NewServer()
	t.Cleanup(k.Close)
	tap, err := fnurltest.NewSTSTap(k.URL, fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tap.Close)
	return tap
}

func awsTarget(controlURL string) Target {
	return Target{Kind: "aws", Profile: "prod", Region: "eu-west-1", Env: "test", ControlURL: controlURL}
}

func staticCreds(key, secret, token string) func(*awsconfig.LoadOptions) error {
	return awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key, secret, token))
}

// Every control operation of an aws profile goes through the Function
// URL, signed with SigV4 (the fake verifies each signature with the
// SDK's signer), and answers as the control API answered.
func TestAWSControlThroughFunctionURL(t *testing.T) {
	clk := clock.NewFake(t0)
	fn := fnURL(t, clk)
	p := NewAWS(awsTarget(fn.URL), AWSOptions{Clock: clk, LoadOptions: []func(*awsconfig.LoadOptions) error{staticCreds(opKey, opSecret, opToken)}})
	ctx := context.Background()

	w, err := p.Whoami(ctx)
	if err != nil || !w.Operator {
		t.Fatalf("whoami: %+v %v", w, err)
	}
	route := registry.Item{Route: &registry.Route{Target: "mailer", Command: "send", QueueARN: "arn:aws:sqs:eu-west-1:123456789012:mailer", DLQARN: "arn:aws:sqs:eu-west-1:123456789012:mailer-dlq"}}
	acl := registry.Item{ACL: &registry.ACL{Source: "acme/billing", Target: "mailer", Command: "send", Allow: true}}
	res, err := p.ApplyRegistry(ctx, wire.ApplyRequest{Items: []registry.Item{route, acl}})
	if err != nil || len(res.Applied) != 2 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	items, err := p.ListRegistry(ctx, registry.KindRoute, RegistryFilter{Target: "mailer"})
	if err != nil || len(items) != 1 || items[0].Route.Command != "send" {
		t.Fatalf("list: %+v %v", items, err)
	}
	it, err := p.GetRegistryItem(ctx, route.ID())
	if err != nil || it.Route == nil || it.Route.QueueARN != route.Route.QueueARN {
		t.Fatalf("get: %+v %v", it, err)
	}
	k, err := p.CreateKey(ctx, wire.KeyRequest{Source: "acme/billing"})
	if err != nil || k.VersionID == "" || len(k.Secret) == 0 {
		t.Fatalf("key create: %+v %v", k, err)
	}
	clk.Advance(time.Hour) // the fake's clock is the client's: still in skew
	if _, err := p.RotateKey(ctx, wire.KeyRequest{Source: "acme/billing"}); err != nil {
		t.Fatalf("key rotate: %v", err)
	}
	raw, err := p.TenantConfig(ctx, "acme")
	if err != nil || !strings.Contains(string(raw), "acme/billing") {
		t.Fatalf("tenant config: %s %v", raw, err)
	}
	h, err := p.RegistryHistory(ctx, route.ID(), 10)
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %+v %v", h, err)
	}
	if _, err := p.RevokeACL(ctx, wire.ACLRevokeRequest{Source: "acme/billing", Target: "mailer", Command: "send"}); err != nil {
		t.Fatalf("acl revoke: %v", err)
	}
	if _, err := p.DeleteRegistryItem(ctx, route.ID(), it.Route.Version); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// A path with an escaped character, and a query: signed as sent.
	if _, err := p.GetRegistryItem(ctx, registry.ID("route a/b c")); StatusOf(err) != http.StatusNotFound {
		t.Fatalf("get of a missing id: %v", err)
	}
	if err := p.CheckCredential(); err != nil {
		t.Fatalf("check credential: %v", err)
	}
	for _, r := range fn.Requests() {
		if r.Refused != "" || r.Caller != opARN {
			t.Errorf("%s %s: refused %q, caller %q", r.Method, r.Path, r.Refused, r.Caller)
		}
	}
}

// The client signs for the Function URL's region, parsed from its host,
// over the profile's.
func TestFunctionURLRegion(t *testing.T) {
	for host, want := range map[string]string{
		"abcdefghij0123456789abcdefghij01.lambda-url.eu-west-1.on.aws": "eu-west-1",
		"X.LAMBDA-URL.US-EAST-2.ON.AWS":                                "us-east-2",
		"x.lambda-url.ap-southeast-4.on.aws":                           "ap-southeast-4",
		"127.0.0.1":                                                    "",
		"x.lambda-url.eu-west-1.on.aws.evil":                           "",
		"lambda-url.eu-west-1.on.aws":                                  "",
		"a.b.lambda-url.eu-west-1.on.aws":                              "",
		"x.execute-api.eu-west-1.on.aws":                               "",
		"x.lambda-url.eu_west.on.aws":                                  "",
		"x.lambda-url.-eu.on.aws":                                      "",
		".lambda-url.eu-west-1.on.aws":                                 "",
	} {
		if got := FunctionURLRegion(host); got != want {
			t.Errorf("%q: %q, want %q", host, got, want)
		}
	}
}

func FuzzFunctionURLRegion(f *testing.F) {
	for _, s := range []string{"x.lambda-url.eu-west-1.on.aws", "127.0.0.1", "x.lambda-url..on.aws", "x.lambda-url.é.on.aws"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		r := FunctionURLRegion(host)
		if r == "" {
			return
		}
		if !strings.HasSuffix(strings.ToLower(host), ".lambda-url."+r+".on.aws") || strings.ContainsAny(r, "./:_") {
			t.Fatalf("%q gave region %q", host, r)
		}
	})
}

// With role_arn, the client assumes it with STS (kumo, behind the tap
// that checks the external id as the role's trust policy would) once,
// and signs with the role's session credentials.
func TestAWSControlAssumesRole(t *testing.T) {
	fn := fnURL(t, clock.System())
	tap := stsTap(t, fn)
	role := "arn:aws:iam::123456789012:role/snavio-test-operator"
	tap.RequireExternalID(role, "ext-1")
	base := []func(*awsconfig.LoadOptions) error{staticCreds("AKIDBASE", "base-secret", ""), awsconfig.WithBaseEndpoint(tap.URL)}
	ctx := context.Background()

	tg := awsTarget(fn.URL)
	tg.RoleARN, tg.ExternalID = role, "ext-1"
	p := NewAWS(tg, AWSOptions{LoadOptions: base})
	for range 3 {
		w, err := p.Whoami(ctx)
		if err != nil || !w.Operator {
			t.Fatalf("whoami as the operator role: %+v %v", w, err)
		}
	}
	calls := tap.Calls()
	if len(calls) != 1 || calls[0].RoleARN != role || calls[0].ExternalID != "ext-1" {
		t.Fatalf("AssumeRole calls %+v, want one with the external id", calls)
	}
	if n := len(fn.Requests()); n != 3 {
		t.Fatalf("%d HTTP calls for 3 whoami", n)
	}

	// A tenant's control role is that tenant; registry changes are the
	// operator's (the control API's 403, with the IAM hint).
	tg.RoleARN, tg.ExternalID = "arn:aws:iam::123456789012:role/snavio-test-tenant-acme", ""
	p = NewAWS(tg, AWSOptions{LoadOptions: base})
	if w, err := p.Whoami(ctx); err != nil || w.Tenant != "acme" {
		t.Fatalf("whoami as a tenant: %+v %v", w, err)
	}
	_, err := p.CreateKey(ctx, wire.KeyRequest{Source: "acme/billing"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Credential, "role_arn") {
		t.Fatalf("tenant key create: %#v", err)
	}

	// A role the control API does not know: the IAM mapping's 403.
	tg.RoleARN = "arn:aws:iam::123456789012:role/someone-else"
	p = NewAWS(tg, AWSOptions{LoadOptions: base})
	_, err = p.Whoami(ctx)
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, "maps to no principal") || !strings.Contains(ae.Fix, "snavio-test-operator") {
		t.Fatalf("unknown role: %#v", err)
	}

	// A wrong external id: AssumeRole fails, and the error says so.
	fn.Requests()
	tg.RoleARN, tg.ExternalID = role, "wrong"
	p = NewAWS(tg, AWSOptions{LoadOptions: base})
	_, err = p.Whoami(ctx)
	var ce *CredentialsError
	if !errors.As(err, &ce) || ce.Step != StepAssumeRole || !strings.HasPrefix(err.Error(), "AssumeRole: assuming "+role) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("wrong external id: %v", err)
	}
	if n := len(fn.Requests()); n != 0 {
		t.Fatalf("%d HTTP calls without credentials", n)
	}
}

// Each failing step has its own error, naming the fix.
func TestAWSControlErrors(t *testing.T) {
	clk := clock.NewFake(t0)
	fn := fnURL(t, clk)
	ctx := context.Background()
	creds := []func(*awsconfig.LoadOptions) error{staticCreds(opKey, opSecret, opToken)}

	// No control_url.
	_, err := NewAWS(awsTarget(""), AWSOptions{}).ListRegistry(ctx, registry.KindRoute, RegistryFilter{})
	var na *NotAvailableError
	if !errors.As(err, &na) || !strings.HasPrefix(err.Error(), "route list: ") || !strings.Contains(err.Error(), "`snavio profile set prod --control-url URL`") || !strings.Contains(err.Error(), "ControlApiUrl") {
		t.Fatalf("no control_url: %v", err)
	}
	// An invalid one (SNAVIO_CONTROL_URL is not checked by the profile).
	if _, err := NewAWS(awsTarget("ftp://x"), AWSOptions{}).Whoami(ctx); err == nil || !strings.Contains(err.Error(), "invalid control_url") {
		t.Fatalf("bad control_url: %v", err)
	}
	// Unreachable.
	down := fnURL(t, clk)
	down.Close()
	_, err = NewAWS(awsTarget(down.URL), AWSOptions{Clock: clk, LoadOptions: creds}).Whoami(ctx)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "cannot reach the control API at "+down.URL) || !strings.Contains(err.Error(), "control_url") || strings.Contains(err.Error(), "dispatch serve") {
		t.Fatalf("unreachable: %v", err)
	}
	// No credentials.
	none := awsconfig.WithCredentialsProvider(awssdk.CredentialsProviderFunc(func(context.Context) (awssdk.Credentials, error) {
		return awssdk.Credentials{}, errors.New("no credentials in the chain")
	}))
	_, err = NewAWS(awsTarget(fn.URL), AWSOptions{Clock: clk, LoadOptions: []func(*awsconfig.LoadOptions) error{none}}).Whoami(ctx)
	var ce *CredentialsError
	if !errors.As(err, &ce) || ce.Step != StepCredentials || !strings.HasPrefix(err.Error(), "credentials: none found: ") {
		t.Fatalf("no credentials: %v", err)
	}
	// An unknown aws_profile.
	tg := awsTarget(fn.URL)
	tg.AWSProfile = "no-such-profile-snavio"
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	_, err = NewAWS(tg, AWSOptions{Clock: clk}).Whoami(ctx)
	if !errors.As(err, &ce) || ce.Step != StepConfig || !strings.Contains(err.Error(), `aws_profile "no-such-profile-snavio"`) {
		t.Fatalf("unknown aws_profile: %v", err)
	}
	// Signed for another region than the Function URL's: its 403.
	tg = awsTarget(fn.URL)
	tg.Region = "us-west-2"
	_, err = NewAWS(tg, AWSOptions{Clock: clk, LoadOptions: creds}).Whoami(ctx)
	if StatusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "valid region") {
		t.Fatalf("wrong region: %v", err)
	}
	// A clock far off: the signature has expired.
	skewed := clock.NewFake(t0.Add(-10 * time.Minute))
	_, err = NewAWS(awsTarget(fn.URL), AWSOptions{Clock: skewed, LoadOptions: creds}).Whoami(ctx)
	if StatusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "signature expired") {
		t.Fatalf("skewed clock: %v", err)
	}
	// A resource the host leaves out: its 501 is a NotAvailableError,
	// with the answer in the chain.
	p := NewAWS(awsTarget(fn.URL), AWSOptions{Clock: clk, LoadOptions: creds})
	_, err = p.GenerateSnapshot(ctx)
	if !errors.As(err, &na) || na.Reason == "" || StatusOf(err) != http.StatusNotImplemented {
		t.Fatalf("501: %#v", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != fnurltest.NotServedCode {
		t.Fatalf("501 code: %#v", ae)
	}
	// Tokens and ingress credentials have no meaning on aws: IAM.
	if _, err := p.IssueToken(ctx, wire.TokenIssueRequest{}); !errors.As(err, &na) || !strings.Contains(err.Error(), "role_arn") || !strings.Contains(err.Error(), "snavio tenant create") {
		t.Fatalf("token issue: %v", err)
	}
	if _, err := p.CreateCredential(ctx, wire.CredentialCreateRequest{}); !errors.As(err, &na) || !strings.Contains(err.Error(), "snavio-test-emit-<tenant>") {
		t.Fatalf("credentials create: %v", err)
	}
}

// The platform loads no AWS configuration until a method needs it, and
// then once.
func TestAWSControlIsLazy(t *testing.T) {
	clk := clock.NewFake(t0)
	fn := fnURL(t, clk)
	loads := 0
	count := func(*awsconfig.LoadOptions) error { loads++; return nil }
	p := NewAWS(awsTarget(fn.URL), AWSOptions{Clock: clk, LoadOptions: []func(*awsconfig.LoadOptions) error{count, staticCreds(opKey, opSecret, opToken)}})
	_ = p.Target()
	if _, err := p.ListTokens(context.Background(), ""); err == nil {
		t.Fatal("token list on aws succeeded")
	}
	if loads != 0 {
		t.Fatalf("%d configuration loads before a control call", loads)
	}
	for range 2 {
		if _, err := p.Whoami(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 1 {
		t.Fatalf("%d configuration loads for two calls, want 1", loads)
	}
}

// A Function URL's own region wins over the profile's: the signature is
// for the region the URL is in.
func TestAWSControlSignsForTheURLsRegion(t *testing.T) {
	clk := clock.NewFake(t0)
	fn, err := fnurltest.New(fnurltest.Options{Region: "eu-west-1", Env: "test", Clock: clk, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Close)
	fn.AddKey(opKey, opSecret, opToken, opARN)
	tg := awsTarget("https://abc123.lambda-url.eu-west-1.on.aws/")
	tg.Region = "us-west-2"
	p := NewAWS(tg, AWSOptions{Clock: clk, HTTPClient: fn.Client(), LoadOptions: []func(*awsconfig.LoadOptions) error{staticCreds(opKey, opSecret, opToken)}})
	if w, err := p.Whoami(context.Background()); err != nil || !w.Operator {
		t.Fatalf("whoami: %+v %v", w, err)
	}
	// The same profile with a URL that names no region signs for
	// us-west-2, which this Function URL refuses.
	tg.ControlURL = fn.URL
	p = NewAWS(tg, AWSOptions{Clock: clk, HTTPClient: fn.Client(), LoadOptions: []func(*awsconfig.LoadOptions) error{staticCreds(opKey, opSecret, opToken)}})
	if _, err := p.Whoami(context.Background()); StatusOf(err) != http.StatusForbidden {
		t.Fatalf("profile region: %v", err)
	}
}

// The bus shares the aws configuration: a refused AssumeRole is reported
// as such, not as a bus that refused PutEvents, and no event is put.
func TestBusNamesAFailedAssumeRole(t *testing.T) {
	fn := fnURL(t, clock.System())
	tap := stsTap(t, fn)
	var got []map[string]any
	bus := putEventsServer(t, &got)
	dir := t.TempDir()
	// STS and EventBridge at endpoints of their own (--endpoint-url would
	// be every service's).
	for key, v := range map[string]string{"AWS_ENDPOINT_URL_STS": tap.URL, "AWS_ENDPOINT_URL_EVENTBRIDGE": bus.URL, "AWS_ACCESS_KEY_ID": "AKIDBASE", "AWS_SECRET_ACCESS_KEY": "base",
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials", "AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": ""} {
		t.Setenv(key, v)
	}
	role := "arn:aws:iam::123456789012:role/snavio-test-operator"
	tap.RequireExternalID(role, "right")
	// The role_arn session then assumes the emit role (kumo grants it).
	tg := Target{Kind: "aws", Region: "eu-west-1", RoleARN: role, ExternalID: "wrong",
		EmitRoleARN: "arn:aws:iam::123456789012:role/snavio/test/emit/snavio-test-emit-a"}
	_, err := NewBus(tg, BusOptions{MaxAttempts: 1}).PutEvents(context.Background(), []Event{{Source: "a/b", DetailType: "t", Detail: []byte(`{}`)}})
	var ce *CredentialsError
	if !errors.As(err, &ce) || ce.Step != StepAssumeRole || strings.Contains(err.Error(), "PutEvents") || len(got) != 0 {
		t.Fatalf("bus with a refused role: %v (%d events put)", err, len(got))
	}
	tg.ExternalID = "right"
	if _, err := NewBus(tg, BusOptions{MaxAttempts: 1}).PutEvents(context.Background(), []Event{{Source: "a/b", DetailType: "t", Detail: []byte(`{}`)}}); err != nil || len(got) != 1 {
		t.Fatalf("bus with the role: %v (%d events put)", err, len(got))
	}
}
