package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/deploy/policy"
	"github.com/snavio/snavio/internal/deploy/policy/iamsim"
	"github.com/snavio/snavio/internal/deploy/ssefake"
	"github.com/snavio/snavio/internal/deploy/stack"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// onboarder returns an Onboarder against kumo in-process (IAM, SNS, SQS;
// kumo checks no trust policy or signature: the policy evaluation in
// internal/deploy/policy covers those; and it drops queues' encryption
// attributes, which ssefake keeps).
func onboarder(t *testing.T) *Onboarder {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	ep := aws.String(srv.URL)
	return &Onboarder{
		IAM:     iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = ep }),
		SNS:     sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = ep }),
		SQS:     ssefake.New(sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = ep })),
		Env:     "test",
		Account: "000000000000",
		Region:  "us-east-1",
		BusARN:  "arn:aws:events:us-east-1:000000000000:event-bus/snavio-test-command-bus",
	}
}

func TestApplyIsIdempotentAndDeleteUndoes(t *testing.T) {
	o := onboarder(t)
	ctx := context.Background()
	tenant := fmt.Sprintf("acme%d", time.Now().UnixNano()%1_000_000)
	billing := "arn:aws:iam::222222222222:role/BillingSender"
	spec := Spec{Tenant: tenant, Services: map[string]string{"billing": billing}}

	res, err := o.Apply(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"created role snavio-test-emit-" + tenant, "set the permission policy of role snavio-test-emit-" + tenant,
		"created role snavio-test-tenant-" + tenant, "set the permission policy of role snavio-test-tenant-" + tenant,
		"created queue snavio-test-telemetry-" + tenant + "-dlq", "created queue snavio-test-telemetry-" + tenant,
		"subscribed queue snavio-test-telemetry-" + tenant + " to topic snavio-test-telemetry-" + tenant}
	if strings.Join(res.Changed, "\n") != strings.Join(want, "\n") {
		t.Errorf("first apply changed:\n%s\nwant:\n%s", strings.Join(res.Changed, "\n"), strings.Join(want, "\n"))
	}

	// The role is under the emit path with the policies Apply computed.
	role := "snavio-test-emit-" + tenant
	r, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(r.Role.Path) != "/snavio/test/emit/" {
		t.Errorf("role path %q", aws.ToString(r.Role.Path))
	}
	trust, _ := policy.EmitTrust([]string{billing})
	tj, _ := json.Marshal(trust)
	if !sameJSON(aws.ToString(r.Role.AssumeRolePolicyDocument), tj) {
		t.Errorf("trust %s, want %s", aws.ToString(r.Role.AssumeRolePolicyDocument), tj)
	}
	p, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy)})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(p.PolicyDocument))
	if !strings.Contains(doc, `"ForAllValues:StringEquals":{"events:source":["`+tenant+`/billing"]}`) {
		t.Errorf("permission policy %s", doc)
	}
	// The control role is under the tenant path, trusted like the emit
	// role, and may only invoke the control function's URL.
	control := "snavio-test-tenant-" + tenant
	cr, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(control)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(cr.Role.Path) != "/snavio/test/tenant/" || !sameJSON(aws.ToString(cr.Role.AssumeRolePolicyDocument), tj) {
		t.Errorf("control role path %q, trust %s", aws.ToString(cr.Role.Path), aws.ToString(cr.Role.AssumeRolePolicyDocument))
	}
	cp, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(control), PolicyName: aws.String(controlPolicy)})
	if err != nil {
		t.Fatal(err)
	}
	tail, _ := stack.Names{Env: "test"}.TailQueuePrefix(tenant)
	wantCP, _ := json.Marshal(ControlPermission("arn:aws:lambda:us-east-1:000000000000:function:snavio-test-control",
		"arn:aws:sns:us-east-1:000000000000:snavio-test-telemetry-"+tenant, "arn:aws:sqs:us-east-1:000000000000:"+tail))
	if !sameJSON(aws.ToString(cp.PolicyDocument), wantCP) {
		t.Errorf("control permission %s, want %s", aws.ToString(cp.PolicyDocument), wantCP)
	}
	// The queue has its DLQ and a policy naming the topic and the tenant.
	q, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("snavio-test-telemetry-" + tenant)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Attributes["RedrivePolicy"], tenant+"-dlq") || !strings.Contains(a.Attributes["Policy"], billing) {
		t.Errorf("queue attributes %v", a.Attributes)
	}

	// The policies read back as the spec; the tenant is listed.
	got, err := o.Get(ctx, tenant)
	if err != nil || got == nil || len(got.Services) != 1 || got.Services["billing"] != billing || got.KMSKey != "" ||
		!strings.HasSuffix(got.ControlRoleARN, ":role/snavio/test/tenant/"+control) || !strings.HasSuffix(got.EmitRoleARN, ":role/snavio/test/emit/"+role) {
		t.Errorf("Get = %+v, %v; want billing -> %s, both roles, no KMS key", got, err, billing)
	}
	if list, err := o.List(ctx); err != nil || !slices.Contains(list, Listed{Tenant: tenant, EmitRole: role, ControlRole: control}) {
		t.Errorf("List = %v, %v; want %s with both roles in it", list, err, tenant)
	}

	// Again: nothing changes.
	if res, err = o.Apply(ctx, spec); err != nil || len(res.Changed) != 0 {
		t.Fatalf("second apply = %v, %v; want no change", res, err)
	}

	// Another service: the role's policies and the queue's readers change.
	spec.Services["account"] = "arn:aws:iam::222222222222:role/AccountSender"
	if res, err = o.Apply(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Changed, "\n"); !strings.Contains(got, "updated the trust policy") || !strings.Contains(got, "set the permission policy") || !strings.Contains(got, "(Policy)") {
		t.Errorf("adding a service changed:\n%s", got)
	}

	// Delete removes everything; again, nothing.
	if res, err = o.Delete(ctx, tenant); err != nil || len(res.Changed) != 6 {
		t.Fatalf("delete = %v, %v", res, err)
	}
	var nse *iamtypes.NoSuchEntityException
	for _, r := range []string{role, control} {
		if _, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r)}); !errors.As(err, &nse) {
			t.Errorf("role %s after delete: %v", r, err)
		}
	}
	if _, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("snavio-test-telemetry-" + tenant)}); !queueMissing(err) {
		t.Errorf("queue after delete: %v", err)
	}
	if res, err = o.Delete(ctx, tenant); err != nil || len(res.Changed) != 0 {
		t.Fatalf("second delete = %v, %v; want nothing to do", res, err)
	}
	if got, err := o.Get(ctx, tenant); err != nil || got != nil {
		t.Errorf("Get after delete = %+v, %v; want nil", got, err)
	}
}

func TestApplyRefusesBadInput(t *testing.T) {
	o := onboarder(t)
	for name, spec := range map[string]Spec{
		"no service":  {Tenant: "acme"},
		"bad role":    {Tenant: "acme", Services: map[string]string{"billing": "BillingSender"}},
		"bad service": {Tenant: "acme", Services: map[string]string{"bil ling": "arn:aws:iam::222222222222:role/B"}},
		"long tenant": {Tenant: strings.Repeat("a", 60), Services: map[string]string{"b": "arn:aws:iam::222222222222:role/B"}},
		"bad tenant":  {Tenant: "ac/me", Services: map[string]string{"b": "arn:aws:iam::222222222222:role/B"}},
	} {
		if _, err := o.Apply(context.Background(), spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzDecodePolicy: decodePolicy never panics, and reads back what the
// policy package writes, plain or URL-encoded as IAM returns it.
func FuzzDecodePolicy(f *testing.F) {
	perm, _ := policy.EmitPermission("arn:aws:events:us-east-1:000000000000:event-bus/b", []policy.EmitBinding{{Source: "acme/billing", RoleARN: "arn:aws:iam::222222222222:role/B"}})
	b, _ := json.Marshal(perm)
	f.Add(string(b))
	f.Add(url.QueryEscape(string(b)))
	f.Add(`{"Statement":[{"Principal":{"AWS":"arn:aws:iam::1:role/x"},"Condition":{"StringLike":{"aws:userid":"*:x"}}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var d policy.Document
		if err := decodePolicy(s, &d); err != nil {
			return
		}
		for _, st := range d.Statement {
			for _, kv := range st.Condition {
				if kv == nil {
					t.Fatal("nil condition map")
				}
			}
		}
	})
}

func TestDecodePolicyRoundTrip(t *testing.T) {
	perm, _ := policy.EmitPermission("arn:aws:events:us-east-1:000000000000:event-bus/b", []policy.EmitBinding{{Source: "acme/billing", RoleARN: "arn:aws:iam::222222222222:role/B"}})
	b, _ := json.Marshal(perm)
	for _, s := range []string{string(b), url.QueryEscape(string(b))} {
		var d policy.Document
		if err := decodePolicy(s, &d); err != nil {
			t.Fatal(err)
		}
		if got := d.Statement[0].Condition["ForAllValues:StringEquals"]["events:source"]; len(got) != 1 || got[0] != "acme/billing" {
			t.Errorf("decoded %+v", d.Statement[0].Condition)
		}
	}
}

// TestKMSKey: a tenant's queues take the given key (SSE-KMS), Get reads
// it back, a second run changes nothing, and a run without the key
// switches them to SQS-managed encryption.
func TestKMSKey(t *testing.T) {
	o := onboarder(t)
	ctx := context.Background()
	key := "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	spec := Spec{Tenant: "kmsco", Services: map[string]string{"billing": "arn:aws:iam::222222222222:role/B"}, KMSKey: key}
	if _, err := o.Apply(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"snavio-test-telemetry-kmsco", "snavio-test-telemetry-kmsco-dlq"} {
		u, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil || a.Attributes["KmsMasterKeyId"] != key {
			t.Errorf("queue %s: KmsMasterKeyId %q, %v; want %s", q, a.Attributes["KmsMasterKeyId"], err, key)
		}
	}
	if got, err := o.Get(ctx, "kmsco"); err != nil || got.KMSKey != key {
		t.Fatalf("Get = %+v, %v; want the key", got, err)
	}
	if res, err := o.Apply(ctx, spec); err != nil || len(res.Changed) != 0 {
		t.Fatalf("second apply = %v, %v; want no change", res, err)
	}
	spec.KMSKey = ""
	res, err := o.Apply(ctx, spec)
	if err != nil || strings.Join(res.Changed, "\n") != "updated queue snavio-test-telemetry-kmsco-dlq (SqsManagedSseEnabled)\nupdated queue snavio-test-telemetry-kmsco (SqsManagedSseEnabled)" {
		t.Fatalf("apply without the key = %v, %v", res, err)
	}
	if got, err := o.Get(ctx, "kmsco"); err != nil || got.KMSKey != "" {
		t.Fatalf("Get = %+v, %v; want no key", got, err)
	}
	spec.KMSKey = "alias/aws/sqs"
	if _, err := o.Apply(ctx, spec); err == nil || !strings.Contains(err.Error(), "AWS-managed key") {
		t.Fatalf("apply with alias/aws/sqs: %v", err)
	}
}

func TestCheckKMSKey(t *testing.T) {
	for _, ok := range []string{
		"1234abcd-12ab-34cd-56ef-1234567890ab", "mrk-1234abcd12ab34cd56ef1234567890ab",
		"arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
		"alias/snavio-telemetry", "arn:aws:kms:eu-west-1:111122223333:alias/snavio/telemetry",
	} {
		if err := CheckKMSKey(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "key", "1234ABCD-12ab-34cd-56ef-1234567890ab", "alias/", "alias/aws/sqs", "alias/a b",
		"arn:aws:kms:us-east-1:1111:key/1234abcd-12ab-34cd-56ef-1234567890ab", "arn:aws:sqs:us-east-1:111122223333:key/x",
		"arn:aws:kms:us-east-1:111122223333:key/nope", "arn:aws:kms:us-east-1:111122223333:grant/x",
	} {
		if err := CheckKMSKey(bad); err == nil || !strings.Contains(err.Error(), "--kms-key") {
			t.Errorf("%q: %v; want a refusal naming --kms-key", bad, err)
		}
	}
}

// FuzzCheckKMSKey: never panics, and what it accepts is one of the four
// forms.
func FuzzCheckKMSKey(f *testing.F) {
	for _, s := range []string{"1234abcd-12ab-34cd-56ef-1234567890ab", "alias/x", "arn:aws:kms:us-east-1:111122223333:alias/x", "mrk-1234abcd12ab34cd56ef1234567890ab", "arn:aws:kms:r:111122223333:key/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckKMSKey(s) != nil {
			return
		}
		if !strings.HasPrefix(s, "alias/") && !strings.HasPrefix(s, "arn:aws") && len(s) != 36 && !strings.HasPrefix(s, "mrk-") {
			t.Fatalf("accepted %q", s)
		}
		if strings.Contains(s, "alias/aws/") {
			t.Fatalf("accepted an AWS-managed alias %q", s)
		}
	})
}

// TestControlPermissionGolden keeps the control role's policy in
// testdata (-update rewrites it, as the policy package's goldens).
func TestControlPermissionGolden(t *testing.T) {
	got, err := ControlPermission("arn:aws:lambda:eu-west-1:123456789012:function:snavio-prod-control",
		"arn:aws:sns:eu-west-1:123456789012:snavio-prod-telemetry-acme", "arn:aws:sqs:eu-west-1:123456789012:snavio-prod-tail-acme_q").JSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "control-permission.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/deploy/tenant -run Golden -update)", err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("control permission:\n%s\nwant (testdata):\n%s", got, want)
	}
}

// TestControlPermissionEvaluation evaluates the tenant control role's
// policy with iam-simulate: acme's role may call the control API's
// Function URL and run tail on its own topic and its own temporary
// queues, and not on another tenant's (acme-x's names start like acme's).
func TestControlPermissionEvaluation(t *testing.T) {
	const acct = "123456789012"
	n := stack.Names{Env: "prod"}
	acmeTail, _ := n.TailQueuePrefix("acme")
	otherTail, _ := n.TailQueuePrefix("acme-x")
	fn := "arn:aws:lambda:eu-west-1:" + acct + ":function:snavio-prod-control"
	topic := func(tenant string) string {
		name, _ := n.TelemetryTopic(tenant)
		return "arn:aws:sns:eu-west-1:" + acct + ":" + name
	}
	perm := ControlPermission(fn, topic("acme"), "arn:aws:sqs:eu-west-1:"+acct+":"+acmeTail)
	sim := func(action, resource string, ctx map[string]any) iamsim.Simulation {
		var s iamsim.Simulation
		s.Request.Principal = "arn:aws:sts::" + acct + ":assumed-role/snavio-prod-tenant-acme/ci"
		s.Request.Action = action
		s.Request.Resource.Resource = resource
		s.Request.Resource.AccountID = acct
		s.Request.ContextVariables = map[string]any{"aws:PrincipalArn": "arn:aws:iam::" + acct + ":role/snavio/prod/tenant/snavio-prod-tenant-acme", "aws:PrincipalAccount": acct}
		for k, v := range ctx {
			s.Request.ContextVariables[k] = v
		}
		s.IdentityPolicies = []iamsim.NamedPolicy{{Name: "control", Policy: perm}}
		s.ServiceControlPolicies, s.ResourceControlPolicies = []any{}, []any{}
		return s
	}
	queue := func(prefix string) string { return "arn:aws:sqs:eu-west-1:" + acct + ":" + prefix + "0123456789ab" }
	cases := []struct {
		name string
		sim  iamsim.Simulation
		want string
	}{
		{"invoke the control API", sim("lambda:InvokeFunctionUrl", fn, map[string]any{"lambda:FunctionUrlAuthType": "AWS_IAM"}), "Allowed"},
		{"invoke without IAM auth", sim("lambda:InvokeFunctionUrl", fn, map[string]any{"lambda:FunctionUrlAuthType": "NONE"}), "ImplicitlyDenied"},
		{"subscribe to its topic", sim("sns:Subscribe", topic("acme"), nil), "Allowed"},
		{"subscribe to another tenant's topic", sim("sns:Subscribe", topic("acme-x"), nil), "ImplicitlyDenied"},
		{"create its tail queue", sim("sqs:CreateQueue", queue(acmeTail), nil), "Allowed"},
		{"delete its tail queue", sim("sqs:DeleteQueue", queue(acmeTail), nil), "Allowed"},
		{"delete another tenant's tail queue", sim("sqs:DeleteQueue", queue(otherTail), nil), "ImplicitlyDenied"},
		{"read the tenant's own telemetry queue", sim("sqs:ReceiveMessage", "arn:aws:sqs:eu-west-1:"+acct+":snavio-prod-telemetry-acme", nil), "ImplicitlyDenied"},
		{"put on the bus", sim("events:PutEvents", "arn:aws:events:eu-west-1:"+acct+":event-bus/snavio-prod-command-bus", nil), "ImplicitlyDenied"},
	}
	var sims []iamsim.Simulation
	for _, c := range cases {
		sims = append(sims, c.sim)
	}
	got := iamsim.Run(t, sims)
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%s: %s, want %s", c.name, got[i], c.want)
		}
	}
}
