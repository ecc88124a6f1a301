// Package tenant on-boards tenants on AWS as data, not IaC (spec section
// D): per tenant the emit role (trust: the tenant's roles; permission:
// PutEvents on the bus for the tenant's sources only), the telemetry
// topic, the telemetry queue with its DLQ and a policy letting only the
// tenant's roles read it, and the subscription. Apply is idempotent and
// reports what it changed; Delete undoes it. docs/deploy.md, "Tenants".
package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/deploy/policy"
	"github.com/snavio/snavio/internal/deploy/stack"
)

// Spec is a tenant's desired state: each service and the tenant role
// that may send as it (source <tenant>/<service>).
type Spec struct {
	Tenant   string
	Services map[string]string
}

// Onboarder makes and removes tenants' resources in one environment.
type Onboarder struct {
	IAM *iam.Client
	SNS *sns.Client
	SQS *sqs.Client
	// Env, Account and Region place the resources; BusARN is the stack's
	// BusArn output.
	Env, Account, Region, BusARN string
	// KMSKeyID encrypts the telemetry queues (SSE-KMS; its key policy must
	// let SNS use it). Empty: SQS-managed encryption.
	KMSKeyID string
}

// Result lists what Apply or Delete changed: "created role ...", ...
// Empty when everything already matched.
type Result struct {
	Tenant  string   `json:"tenant"`
	Changed []string `json:"changed"`
}

const permissionPolicy = "snavio-emit"

func (o *Onboarder) names(tenant string) (role, topic, queue, dlq string, err error) {
	n := stack.Names{Env: o.Env}
	if role, err = n.EmitRole(tenant); err != nil {
		return
	}
	if topic, err = n.TelemetryTopic(tenant); err != nil {
		return
	}
	queue = topic
	dlq = topic + "-dlq"
	if len(dlq) > 80 {
		err = fmt.Errorf("tenant %q: its telemetry queue name %q is over SQS's 80 characters: shorten the tenant id or the env", tenant, dlq)
	}
	return
}

// Apply makes the tenant's resources match spec.
func (o *Onboarder) Apply(ctx context.Context, spec Spec) (*Result, error) {
	role, topic, queue, dlq, err := o.names(spec.Tenant)
	if err != nil {
		return nil, err
	}
	if len(spec.Services) == 0 {
		return nil, fmt.Errorf("tenant %s: no service: add one (its source and the tenant role that sends as it)", spec.Tenant)
	}
	res := &Result{Tenant: spec.Tenant, Changed: []string{}}
	var roles []string
	var bindings []policy.EmitBinding
	for _, svc := range slices.Sorted(maps.Keys(spec.Services)) {
		bindings = append(bindings, policy.EmitBinding{Source: spec.Tenant + "/" + svc, RoleARN: spec.Services[svc]})
		roles = append(roles, spec.Services[svc])
	}
	trust, err := policy.EmitTrust(roles)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", spec.Tenant, err)
	}
	perm, err := policy.EmitPermission(o.BusARN, bindings)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", spec.Tenant, err)
	}
	if err := o.applyRole(ctx, role, trust, perm, res); err != nil {
		return nil, err
	}
	t, err := o.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(topic), Tags: []snstypes.Tag{{Key: aws.String("snavio:env"), Value: aws.String(o.Env)}}})
	if err != nil {
		return nil, fmt.Errorf("tenant %s: create topic %s: %w", spec.Tenant, topic, err)
	}
	topicARN := aws.ToString(t.TopicArn)
	_, dlqARN, err := o.applyQueue(ctx, dlq, map[string]string{}, res)
	if err != nil {
		return nil, err
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": 5})
	qp := policy.Document{Version: policy.Version, Statement: []policy.Statement{
		{Sid: "TopicDelivers", Effect: policy.Allow, Principal: &policy.Principal{Service: []string{"sns.amazonaws.com"}},
			Action: []string{"sqs:SendMessage"}, Resource: []string{o.queueARN(queue)},
			Condition: policy.Condition{"ArnEquals": {"aws:SourceArn": {topicARN}}}},
		{Sid: "TenantReads", Effect: policy.Allow, Principal: &policy.Principal{AWS: dedupe(roles)},
			Action:   []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"},
			Resource: []string{o.queueARN(queue)}},
	}}
	qpJSON, _ := json.Marshal(qp)
	attrs := map[string]string{"RedrivePolicy": string(redrive), "Policy": string(qpJSON)}
	_, queueARN, err := o.applyQueue(ctx, queue, attrs, res)
	if err != nil {
		return nil, err
	}
	subs, err := o.SNS.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN)})
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list subscriptions of %s: %w", spec.Tenant, topic, err)
	}
	if !slices.ContainsFunc(subs.Subscriptions, func(s snstypes.Subscription) bool { return aws.ToString(s.Endpoint) == queueARN }) {
		if _, err := o.SNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
			Attributes: map[string]string{"RawMessageDelivery": "false"}}); err != nil {
			return nil, fmt.Errorf("tenant %s: subscribe %s to %s: %w", spec.Tenant, queue, topic, err)
		}
		res.Changed = append(res.Changed, "subscribed queue "+queue+" to topic "+topic)
	}
	return res, nil
}

func dedupe(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func (o *Onboarder) queueARN(name string) string {
	return "arn:aws:sqs:" + o.Region + ":" + o.Account + ":" + name
}

func (o *Onboarder) applyRole(ctx context.Context, role string, trust, perm policy.Document, res *Result) error {
	trustJSON, _ := json.Marshal(trust)
	permJSON, _ := json.Marshal(perm)
	got, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	var nse *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &nse):
		if _, err := o.IAM.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName: aws.String(role), Path: aws.String(stack.Names{Env: o.Env}.EmitRolePath()),
			AssumeRolePolicyDocument: aws.String(string(trustJSON)), MaxSessionDuration: aws.Int32(3600),
			Description: aws.String("snavio emit role, environment " + o.Env),
			Tags:        []iamtypes.Tag{{Key: aws.String("snavio:env"), Value: aws.String(o.Env)}},
		}); err != nil {
			return fmt.Errorf("create role %s: %w", role, err)
		}
		res.Changed = append(res.Changed, "created role "+role)
	case err != nil:
		return fmt.Errorf("get role %s: %w", role, err)
	case !sameJSON(aws.ToString(got.Role.AssumeRolePolicyDocument), trustJSON):
		if _, err := o.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(role), PolicyDocument: aws.String(string(trustJSON))}); err != nil {
			return fmt.Errorf("update trust of role %s: %w", role, err)
		}
		res.Changed = append(res.Changed, "updated the trust policy of role "+role)
	}
	cur, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy)})
	if err == nil && sameJSON(aws.ToString(cur.PolicyDocument), permJSON) {
		return nil
	}
	if err != nil && !errors.As(err, &nse) {
		return fmt.Errorf("get policy of role %s: %w", role, err)
	}
	if _, err := o.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy), PolicyDocument: aws.String(string(permJSON))}); err != nil {
		return fmt.Errorf("put policy of role %s: %w", role, err)
	}
	res.Changed = append(res.Changed, "set the permission policy of role "+role)
	return nil
}

// sameJSON compares a policy as IAM returns it (URL-encoded on AWS) with
// the one we would write.
func sameJSON(got string, want []byte) bool {
	if dec, err := url.QueryUnescape(got); err == nil {
		got = dec
	}
	var a, b any
	return json.Unmarshal([]byte(got), &a) == nil && json.Unmarshal(want, &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}

// applyQueue makes queue exist with attrs (plus encryption) and returns
// its URL and ARN.
func (o *Onboarder) applyQueue(ctx context.Context, name string, attrs map[string]string, res *Result) (string, string, error) {
	attrs = maps.Clone(attrs)
	if o.KMSKeyID != "" {
		attrs["KmsMasterKeyId"] = o.KMSKeyID
	} else {
		attrs["SqsManagedSseEnabled"] = "true"
	}
	var qurl string
	got, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	switch {
	case queueMissing(err):
		out, err := o.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs, Tags: map[string]string{"snavio:env": o.Env}})
		if err != nil {
			return "", "", fmt.Errorf("create queue %s: %w", name, err)
		}
		qurl = aws.ToString(out.QueueUrl)
		res.Changed = append(res.Changed, "created queue "+name)
	case err != nil:
		return "", "", fmt.Errorf("get queue %s: %w", name, err)
	default:
		qurl = aws.ToString(got.QueueUrl)
		cur, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(qurl), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			return "", "", fmt.Errorf("read queue %s: %w", name, err)
		}
		diff := map[string]string{}
		for k, v := range attrs {
			c, reported := cur.Attributes[k]
			if k == "SqsManagedSseEnabled" && !reported {
				continue // SQS always reports it; kumo never does
			}
			if c != v && !(strings.HasPrefix(v, "{") && sameJSON(c, []byte(v))) {
				diff[k] = v
			}
		}
		if len(diff) > 0 {
			if _, err := o.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(qurl), Attributes: diff}); err != nil {
				return "", "", fmt.Errorf("update queue %s: %w", name, err)
			}
			res.Changed = append(res.Changed, "updated queue "+name+" ("+strings.Join(slices.Sorted(maps.Keys(diff)), ", ")+")")
		}
	}
	a, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(qurl), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("read queue %s: %w", name, err)
	}
	return qurl, a.Attributes["QueueArn"], nil
}

// Delete removes the tenant's resources; what is already gone is skipped.
func (o *Onboarder) Delete(ctx context.Context, tenant string) (*Result, error) {
	role, topic, queue, dlq, err := o.names(tenant)
	if err != nil {
		return nil, err
	}
	res := &Result{Tenant: tenant, Changed: []string{}}
	topicARN := "arn:aws:sns:" + o.Region + ":" + o.Account + ":" + topic
	subs, err := o.SNS.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN)})
	var nf *snstypes.NotFoundException
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, fmt.Errorf("list subscriptions of %s: %w", topic, err)
	default:
		for _, s := range subs.Subscriptions {
			if _, err := o.SNS.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: s.SubscriptionArn}); err != nil {
				return nil, fmt.Errorf("unsubscribe %s: %w", aws.ToString(s.Endpoint), err)
			}
			res.Changed = append(res.Changed, "unsubscribed "+aws.ToString(s.Endpoint))
		}
		if _, err := o.SNS.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(topicARN)}); err != nil {
			return nil, fmt.Errorf("delete topic %s: %w", topic, err)
		}
		res.Changed = append(res.Changed, "deleted topic "+topic)
	}
	for _, q := range []string{queue, dlq} {
		got, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
		if queueMissing(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get queue %s: %w", q, err)
		}
		if _, err := o.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: got.QueueUrl}); err != nil {
			return nil, fmt.Errorf("delete queue %s: %w", q, err)
		}
		res.Changed = append(res.Changed, "deleted queue "+q)
	}
	_, err = o.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy)})
	var nse *iamtypes.NoSuchEntityException
	if err != nil && !errors.As(err, &nse) {
		return nil, fmt.Errorf("delete policy of role %s: %w", role, err)
	}
	if _, err := o.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(role)}); err == nil {
		res.Changed = append(res.Changed, "deleted role "+role)
	} else if !errors.As(err, &nse) {
		return nil, fmt.Errorf("delete role %s: %w", role, err)
	}
	return res, nil
}

// queueMissing tells SQS's "no such queue", as the SDK types it or by its
// query-protocol code (which kumo answers with).
func queueMissing(err error) bool {
	var missing *sqstypes.QueueDoesNotExist
	var ae smithy.APIError
	return errors.As(err, &missing) || errors.As(err, &ae) && ae.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue"
}

// Get reads a tenant's Spec back from its emit role: the permission
// policy binds each source to a role name, the trust policy names each
// role's ARN. The policies are the record; nil when there is no role.
func (o *Onboarder) Get(ctx context.Context, tenant string) (*Spec, error) {
	role, _, _, _, err := o.names(tenant)
	if err != nil {
		return nil, err
	}
	r, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	var nse *iamtypes.NoSuchEntityException
	if errors.As(err, &nse) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get role %s: %w", role, err)
	}
	var trust, perm policy.Document
	if err := decodePolicy(aws.ToString(r.Role.AssumeRolePolicyDocument), &trust); err != nil {
		return nil, fmt.Errorf("role %s: trust policy: %w", role, err)
	}
	p, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy)})
	if err != nil && !errors.As(err, &nse) {
		return nil, fmt.Errorf("get policy of role %s: %w", role, err)
	}
	spec := &Spec{Tenant: tenant, Services: map[string]string{}}
	if err != nil {
		return spec, nil
	}
	if err := decodePolicy(aws.ToString(p.PolicyDocument), &perm); err != nil {
		return nil, fmt.Errorf("role %s: permission policy: %w", role, err)
	}
	arns := map[string]string{} // role name -> ARN
	for _, st := range trust.Statement {
		if st.Principal != nil && len(st.Principal.AWS) == 1 {
			if name, err := policy.RoleName(st.Principal.AWS[0]); err == nil {
				arns[name] = st.Principal.AWS[0]
			}
		}
	}
	for _, st := range perm.Statement {
		sources := st.Condition["ForAllValues:StringEquals"]["events:source"]
		users := st.Condition["StringLike"]["aws:userid"]
		if len(sources) != 1 || len(users) != 1 {
			return nil, fmt.Errorf("role %s: statement %q is not an emit binding: was the policy edited by hand? Delete the tenant and create it again", role, st.Sid)
		}
		_, service, _ := strings.Cut(sources[0], "/")
		spec.Services[service] = arns[strings.TrimPrefix(users[0], "*:")]
	}
	return spec, nil
}

// decodePolicy decodes a policy as IAM returns it: URL-encoded JSON whose
// single values may be strings instead of lists.
func decodePolicy(s string, d *policy.Document) error {
	if dec, err := url.QueryUnescape(s); err == nil {
		s = dec
	}
	var raw struct {
		Statement []struct {
			Sid       string
			Principal struct{ AWS any }
			Condition map[string]map[string]any
		}
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return err
	}
	list := func(v any) []string {
		switch x := v.(type) {
		case string:
			return []string{x}
		case []any:
			var out []string
			for _, e := range x {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
		return nil
	}
	for _, st := range raw.Statement {
		out := policy.Statement{Sid: st.Sid, Condition: policy.Condition{}}
		if principals := list(st.Principal.AWS); principals != nil {
			out.Principal = &policy.Principal{AWS: principals}
		}
		for op, kv := range st.Condition {
			out.Condition[op] = map[string][]string{}
			for k, v := range kv {
				out.Condition[op][k] = list(v)
			}
		}
		d.Statement = append(d.Statement, out)
	}
	return nil
}

// List returns the tenants with an emit role in the environment, sorted.
func (o *Onboarder) List(ctx context.Context) ([]string, error) {
	n := stack.Names{Env: o.Env}
	prefix := "snavio-" + o.Env + "-emit-"
	var out []string
	p := iam.NewListRolesPaginator(o.IAM, &iam.ListRolesInput{PathPrefix: aws.String(n.EmitRolePath())})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list roles under %s: %w", n.EmitRolePath(), err)
		}
		for _, r := range page.Roles {
			if aws.ToString(r.Path) == n.EmitRolePath() && strings.HasPrefix(aws.ToString(r.RoleName), prefix) {
				out = append(out, strings.TrimPrefix(aws.ToString(r.RoleName), prefix))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
