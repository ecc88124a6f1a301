package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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
)

// onboarder returns an Onboarder against kumo in-process (IAM, SNS, SQS;
// kumo checks no trust policy or signature: the policy evaluation in
// internal/deploy/policy covers those).
func onboarder(t *testing.T) *Onboarder {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	ep := aws.String(srv.URL)
	return &Onboarder{
		IAM:     iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = ep }),
		SNS:     sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = ep }),
		SQS:     sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = ep }),
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
	if err != nil || got == nil || len(got.Services) != 1 || got.Services["billing"] != billing {
		t.Errorf("Get = %+v, %v; want billing -> %s", got, err, billing)
	}
	if list, err := o.List(ctx); err != nil || !slices.Contains(list, tenant) {
		t.Errorf("List = %v, %v; want %s in it", list, err, tenant)
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
	if res, err = o.Delete(ctx, tenant); err != nil || len(res.Changed) != 5 {
		t.Fatalf("delete = %v, %v", res, err)
	}
	var nse *iamtypes.NoSuchEntityException
	if _, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); !errors.As(err, &nse) {
		t.Errorf("role after delete: %v", err)
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
