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
// that may send as it (source <tenant>/<service>), and the KMS key of its
// telemetry queues.
type Spec struct {
	Tenant   string
	Services map[string]string
	// KMSKey encrypts the telemetry queue and its DLQ (SSE-KMS: a key id,
	// key ARN, alias name or alias ARN, checked by CheckKMSKey; the key
	// policy must let SNS and the tenant's roles use it, docs/deploy.md).
	// Empty: SQS-managed encryption (SSE-SQS).
	KMSKey string
}

// SQSAPI is the SQS calls the Onboarder makes; *sqs.Client has them.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
}

// Onboarder makes and removes tenants' resources in one environment.
type Onboarder struct {
	IAM *iam.Client
	SNS *sns.Client
	SQS SQSAPI
	// Env, Account and Region place the resources; BusARN is the stack's
	// BusArn output. Partition is the account's ("aws" when empty).
	Env, Account, Region, BusARN, Partition string
}

// Result lists what Apply or Delete changed: "created role ...", ...
// Empty when everything already matched.
type Result struct {
	Tenant  string   `json:"tenant"`
	Changed []string `json:"changed"`
}

// The inline policies of the tenant's roles.
const (
	permissionPolicy = "snavio-emit"
	controlPolicy    = "snavio-control"
)

// resources are the names of a tenant's resources.
type resources struct {
	emitRole, controlRole, topic, queue, dlq string
	// tailQueues prefixes the tenant's temporary tail queues.
	tailQueues string
}

func (o *Onboarder) names(tenant string) (r resources, err error) {
	n := stack.Names{Env: o.Env}
	if r.emitRole, err = n.EmitRole(tenant); err != nil {
		return
	}
	if r.controlRole, err = n.TenantRole(tenant); err != nil {
		return
	}
	if r.topic, err = n.TelemetryTopic(tenant); err != nil {
		return
	}
	if r.tailQueues, err = n.TailQueuePrefix(tenant); err != nil {
		return
	}
	r.queue = r.topic
	r.dlq = r.topic + "-dlq"
	if len(r.dlq) > 80 {
		err = fmt.Errorf("tenant %q: its telemetry queue name %q is over SQS's 80 characters: shorten the tenant id or the env", tenant, r.dlq)
	}
	return
}

func (o *Onboarder) partition() string {
	if o.Partition == "" {
		return "aws"
	}
	return o.Partition
}

// ControlFunctionARN is the environment's control function, which the
// tenant's control role may invoke through its Function URL.
func (o *Onboarder) ControlFunctionARN() string {
	return "arn:" + o.partition() + ":lambda:" + o.Region + ":" + o.Account + ":function:" + stack.Names{Env: o.Env}.Function(stack.FnControl)
}

// ControlPermission is the tenant control role's permission policy: it
// may call the control API's Function URL (AWS_IAM auth), which maps the
// role's callers to the tenant, and follow its own telemetry as `snavio
// tail` and `send --wait` do: subscribe temporary queues named
// tailQueues* (the tenant's own prefix, stack.Names.TailQueuePrefix) to
// its topic. ListQueues cannot be limited to a prefix by IAM.
func ControlPermission(functionARN, topicARN, tailQueues string) policy.Document {
	return policy.Document{Version: policy.Version, Statement: []policy.Statement{{
		Sid: "InvokeControlAPI", Effect: policy.Allow,
		Action: []string{"lambda:InvokeFunctionUrl"}, Resource: []string{functionARN},
		Condition: policy.Condition{"StringEquals": {"lambda:FunctionUrlAuthType": {"AWS_IAM"}}},
	}, {
		Sid: "TailSubscribe", Effect: policy.Allow,
		Action: []string{"sns:Subscribe", "sns:Unsubscribe"}, Resource: []string{topicARN},
	}, {
		Sid: "TailQueues", Effect: policy.Allow,
		Action: []string{"sqs:CreateQueue", "sqs:TagQueue", "sqs:ListQueueTags", "sqs:GetQueueUrl", "sqs:GetQueueAttributes",
			"sqs:SetQueueAttributes", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:DeleteQueue"},
		Resource: []string{tailQueues + "*"},
	}, {
		Sid: "TailList", Effect: policy.Allow,
		Action: []string{"sqs:ListQueues"}, Resource: []string{"*"},
	}}}
}

// Apply makes the tenant's resources match spec.
func (o *Onboarder) Apply(ctx context.Context, spec Spec) (*Result, error) {
	names, err := o.names(spec.Tenant)
	if err != nil {
		return nil, err
	}
	if len(spec.Services) == 0 {
		return nil, fmt.Errorf("tenant %s: no service: add one (its source and the tenant role that sends as it)", spec.Tenant)
	}
	if spec.KMSKey != "" {
		if err := CheckKMSKey(spec.KMSKey); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", spec.Tenant, err)
		}
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
	n := stack.Names{Env: o.Env}
	if err := o.applyRole(ctx, iamRole{name: names.emitRole, path: n.EmitRolePath(), kind: "emit", policyName: permissionPolicy}, trust, perm, res); err != nil {
		return nil, err
	}
	// The control role is trusted like the emit role: the same tenant
	// roles, each with a session named after itself.
	if err := o.applyRole(ctx, iamRole{name: names.controlRole, path: n.TenantRolePath(), kind: "control", policyName: controlPolicy}, trust, ControlPermission(o.ControlFunctionARN(), o.topicARN(names.topic), o.queueARN(names.tailQueues)), res); err != nil {
		return nil, err
	}
	topic, queue, dlq := names.topic, names.queue, names.dlq
	t, err := o.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(topic), Tags: []snstypes.Tag{{Key: aws.String("snavio:env"), Value: aws.String(o.Env)}}})
	if err != nil {
		return nil, fmt.Errorf("tenant %s: create topic %s: %w", spec.Tenant, topic, err)
	}
	topicARN := aws.ToString(t.TopicArn)
	_, dlqARN, err := o.applyQueue(ctx, dlq, spec.KMSKey, map[string]string{}, res)
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
	_, queueARN, err := o.applyQueue(ctx, queue, spec.KMSKey, attrs, res)
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

func (o *Onboarder) topicARN(name string) string {
	return "arn:" + o.partition() + ":sns:" + o.Region + ":" + o.Account + ":" + name
}

func (o *Onboarder) queueARN(name string) string {
	return "arn:" + o.partition() + ":sqs:" + o.Region + ":" + o.Account + ":" + name
}

// iamRole is one of the tenant's roles: its name and path, its kind for
// messages ("emit", "control") and the name of its inline policy.
type iamRole struct {
	name, path, kind, policyName string
}

func (o *Onboarder) applyRole(ctx context.Context, r iamRole, trust, perm policy.Document, res *Result) error {
	role := r.name
	trustJSON, _ := json.Marshal(trust)
	permJSON, _ := json.Marshal(perm)
	got, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	var nse *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &nse):
		if _, err := o.IAM.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName: aws.String(role), Path: aws.String(r.path),
			AssumeRolePolicyDocument: aws.String(string(trustJSON)), MaxSessionDuration: aws.Int32(3600),
			Description: aws.String("snavio " + r.kind + " role, environment " + o.Env),
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
	cur, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(r.policyName)})
	if err == nil && sameJSON(aws.ToString(cur.PolicyDocument), permJSON) {
		return nil
	}
	if err != nil && !errors.As(err, &nse) {
		return fmt.Errorf("get policy of role %s: %w", role, err)
	}
	if _, err := o.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(r.policyName), PolicyDocument: aws.String(string(permJSON))}); err != nil {
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

// applyQueue makes queue exist with attrs plus encryption (SSE-KMS with
// kmsKey, else SSE-SQS) and returns its URL and ARN.
func (o *Onboarder) applyQueue(ctx context.Context, name, kmsKey string, attrs map[string]string, res *Result) (string, string, error) {
	attrs = maps.Clone(attrs)
	if kmsKey != "" {
		attrs["KmsMasterKeyId"] = kmsKey
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
	names, err := o.names(tenant)
	if err != nil {
		return nil, err
	}
	topic, queue, dlq := names.topic, names.queue, names.dlq
	res := &Result{Tenant: tenant, Changed: []string{}}
	topicARN := o.topicARN(topic)
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
	for _, r := range [][2]string{{names.controlRole, controlPolicy}, {names.emitRole, permissionPolicy}} {
		if err := o.deleteRole(ctx, r[0], r[1], res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// deleteRole removes role and its inline policy; a missing one is skipped.
func (o *Onboarder) deleteRole(ctx context.Context, role, policyName string, res *Result) error {
	_, err := o.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(policyName)})
	var nse *iamtypes.NoSuchEntityException
	if err != nil && !errors.As(err, &nse) {
		return fmt.Errorf("delete policy of role %s: %w", role, err)
	}
	if _, err := o.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(role)}); err == nil {
		res.Changed = append(res.Changed, "deleted role "+role)
	} else if !errors.As(err, &nse) {
		return fmt.Errorf("delete role %s: %w", role, err)
	}
	return nil
}

// queueMissing tells SQS's "no such queue", as the SDK types it or by its
// query-protocol code (which kumo answers with).
func queueMissing(err error) bool {
	var missing *sqstypes.QueueDoesNotExist
	var ae smithy.APIError
	return errors.As(err, &missing) || errors.As(err, &ae) && ae.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue"
}

// State is a tenant as Get reads it back: its Spec and the ARNs of its
// roles ("" for a role that is missing, e.g. a control role of a tenant
// created before control roles existed: tenant create makes it).
type State struct {
	Spec
	EmitRoleARN, ControlRoleARN string
}

// Get reads a tenant back from AWS: the services from its emit role (the
// permission policy binds each source to a role name, the trust policy
// names each role's ARN), the KMS key from its telemetry queue. The
// policies are the record; nil when there is no emit role.
func (o *Onboarder) Get(ctx context.Context, tenant string) (*State, error) {
	names, err := o.names(tenant)
	if err != nil {
		return nil, err
	}
	role := names.emitRole
	r, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	var nse *iamtypes.NoSuchEntityException
	if errors.As(err, &nse) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get role %s: %w", role, err)
	}
	st := &State{Spec: Spec{Tenant: tenant, Services: map[string]string{}}, EmitRoleARN: aws.ToString(r.Role.Arn)}
	cr, err := o.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(names.controlRole)})
	switch {
	case err == nil:
		st.ControlRoleARN = aws.ToString(cr.Role.Arn)
	case !errors.As(err, &nse):
		return nil, fmt.Errorf("get role %s: %w", names.controlRole, err)
	}
	if st.KMSKey, err = o.queueKMSKey(ctx, names.queue); err != nil {
		return nil, err
	}
	var trust, perm policy.Document
	if err := decodePolicy(aws.ToString(r.Role.AssumeRolePolicyDocument), &trust); err != nil {
		return nil, fmt.Errorf("role %s: trust policy: %w", role, err)
	}
	p, err := o.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(permissionPolicy)})
	if err != nil && !errors.As(err, &nse) {
		return nil, fmt.Errorf("get policy of role %s: %w", role, err)
	}
	if err != nil {
		return st, nil
	}
	if err := decodePolicy(aws.ToString(p.PolicyDocument), &perm); err != nil {
		return nil, fmt.Errorf("role %s: permission policy: %w", role, err)
	}
	arns := map[string]string{} // role name -> ARN
	for _, stmt := range trust.Statement {
		if stmt.Principal != nil && len(stmt.Principal.AWS) == 1 {
			if name, err := policy.RoleName(stmt.Principal.AWS[0]); err == nil {
				arns[name] = stmt.Principal.AWS[0]
			}
		}
	}
	for _, stmt := range perm.Statement {
		sources := stmt.Condition["ForAllValues:StringEquals"]["events:source"]
		users := stmt.Condition["StringLike"]["aws:userid"]
		if len(sources) != 1 || len(users) != 1 {
			return nil, fmt.Errorf("role %s: statement %q is not an emit binding: was the policy edited by hand? Delete the tenant and create it again", role, stmt.Sid)
		}
		_, service, _ := strings.Cut(sources[0], "/")
		st.Services[service] = arns[strings.TrimPrefix(users[0], "*:")]
	}
	return st, nil
}

// queueKMSKey is the KMS key of the telemetry queue; "" when it uses
// SQS-managed encryption or does not exist.
func (o *Onboarder) queueKMSKey(ctx context.Context, queue string) (string, error) {
	u, err := o.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
	if queueMissing(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get queue %s: %w", queue, err)
	}
	a, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameKmsMasterKeyId}})
	if err != nil {
		return "", fmt.Errorf("read queue %s: %w", queue, err)
	}
	return a.Attributes["KmsMasterKeyId"], nil
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

// Listed is a tenant as List finds it: the names of its roles, "" for
// one that is missing.
type Listed struct {
	Tenant      string `json:"tenant"`
	EmitRole    string `json:"emit_role"`
	ControlRole string `json:"control_role"`
}

// List returns the tenants with an emit or control role in the
// environment, sorted.
func (o *Onboarder) List(ctx context.Context) ([]Listed, error) {
	n := stack.Names{Env: o.Env}
	byTenant := map[string]*Listed{}
	for _, kind := range []struct {
		path, prefix string
		set          func(*Listed, string)
	}{
		{n.EmitRolePath(), "snavio-" + o.Env + "-emit-", func(l *Listed, r string) { l.EmitRole = r }},
		{n.TenantRolePath(), "snavio-" + o.Env + "-tenant-", func(l *Listed, r string) { l.ControlRole = r }},
	} {
		p := iam.NewListRolesPaginator(o.IAM, &iam.ListRolesInput{PathPrefix: aws.String(kind.path)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("list roles under %s: %w", kind.path, err)
			}
			for _, r := range page.Roles {
				name := aws.ToString(r.RoleName)
				if aws.ToString(r.Path) != kind.path || !strings.HasPrefix(name, kind.prefix) {
					continue
				}
				t := strings.TrimPrefix(name, kind.prefix)
				if byTenant[t] == nil {
					byTenant[t] = &Listed{Tenant: t}
				}
				kind.set(byTenant[t], name)
			}
		}
	}
	out := []Listed{}
	for _, t := range slices.Sorted(maps.Keys(byTenant)) {
		out = append(out, *byTenant[t])
	}
	return out, nil
}
