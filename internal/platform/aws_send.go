package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/deploy/stack"
)

// StepPutEvents is the bus's step of send, named in its errors (the
// credential steps are CredentialsError's).
const StepPutEvents = "PutEvents"

// StepError is an AWS command that failed at Step. Msg is one line that
// says what to do; Unwrap gives the SDK's error for -v. Retryable is true
// when trying again later may pass (the service was unreachable,
// throttled, or failed on its side).
type StepError struct {
	Step      string
	Msg       string
	Retryable bool
	Err       error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Msg }
func (e *StepError) Unwrap() error { return e.Err }

// emitSessionDuration is the emit role session send asks for: STS's
// least, as send makes one PutEvents.
const emitSessionDuration = 900

// stsClient is STS at the profile's endpoint, when it has one (an
// emulator serving every service), else the SDK's.
func stsClient(cfg awssdk.Config, t Target) *sts.Client {
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		if t.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(t.Endpoint)
		}
	})
}

// callerCredentials resolves the caller's own credentials (the SDK's
// chain, then role_arn), so that a missing or expired credential is
// reported as such and not as a failure of the call that needed it.
func callerCredentials(ctx context.Context, cfg awssdk.Config, t Target) error {
	if cfg.Credentials == nil {
		return &StepError{Step: StepCredentials, Msg: "no AWS credentials: configure them (aws configure, aws sso login, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) or set the profile's aws_profile"}
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ce *CredentialsError
		if errors.As(err, &ce) {
			return ce // names its step and the fix already
		}
		how := "configure them (aws configure, aws sso login, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) or set the profile's aws_profile"
		if t.RoleARN != "" {
			how = fmt.Sprintf("check that your credentials may assume the profile's role_arn %s", t.RoleARN)
		}
		return &StepError{Step: StepCredentials, Msg: fmt.Sprintf("cannot resolve the caller's AWS credentials (aws_profile %q): %v; %s", t.AWSProfile, short1(err), how), Err: err}
	}
	return nil
}

// EmitRole describes the tenant emit role of an aws profile.
type EmitRole struct {
	ARN, Account, Partition string
	// Env and Tenant are read from the role's path and name
	// (/snavio/<env>/emit/snavio-<env>-emit-<tenant>) or the profile's
	// env; empty when the role is named otherwise.
	Env, Tenant string
}

// EmitRoleOf reads the profile's emit_role_arn. A profile without one is
// an error naming the fix: the role is in the platform's account, which
// the CLI cannot learn without a call.
func EmitRoleOf(t Target) (EmitRole, error) {
	if t.EmitRoleARN == "" {
		return EmitRole{}, fmt.Errorf("the profile has no emit_role_arn: set the tenant's emit role with `snavio profile set NAME --emit-role-arn arn:aws:iam::<platform account>:role/snavio/<env>/emit/snavio-<env>-emit-<tenant>` (the operator's `snavio tenant apply` prints it)")
	}
	parts := strings.SplitN(t.EmitRoleARN, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || len(parts[4]) != 12 || !strings.HasPrefix(parts[5], "role/") {
		return EmitRole{}, fmt.Errorf("the profile's emit_role_arn %q is not an IAM role ARN: use arn:aws:iam::<12-digit account>:role/<path/>snavio-<env>-emit-<tenant>", t.EmitRoleARN)
	}
	r := EmitRole{ARN: t.EmitRoleARN, Partition: parts[1], Account: parts[4], Env: t.Env}
	path := strings.Split(strings.TrimPrefix(parts[5], "role/"), "/")
	name := path[len(path)-1]
	if r.Env == "" && len(path) == 4 && path[0] == "snavio" && path[2] == "emit" {
		r.Env = path[1]
	}
	if r.Env != "" {
		r.Tenant, _ = strings.CutPrefix(name, "snavio-"+r.Env+"-emit-")
		if r.Tenant == name {
			r.Tenant = ""
		}
	}
	return r, nil
}

// TopicARN is the ARN of tenant's telemetry topic in the emit role's
// account (the platform's), region and environment.
func (r EmitRole) TopicARN(region, tenant string) (string, error) {
	if r.Env == "" {
		return "", errors.New("the profile has no env and its emit_role_arn does not name one: set it with `snavio profile set NAME --env ENV` (the deployment's environment)")
	}
	topic, err := stack.Names{Env: r.Env}.TelemetryTopic(tenant)
	if err != nil {
		return "", err
	}
	return "arn:" + r.Partition + ":sns:" + region + ":" + r.Account + ":" + topic, nil
}

// BusNameOf is the EventBusName of an aws profile: bus_name, else its
// env's bus (the deployed stack's, snavio-<env>-command-bus), else the
// spec's. The configuration defaults bus_name to the spec's name, so that
// name with an env set means the env's bus.
func BusNameOf(t Target) string {
	if t.Env != "" && (t.BusName == "" || t.BusName == DefaultBusName) {
		return stack.Names{Env: t.Env}.Bus()
	}
	return firstNonEmpty(t.BusName, DefaultBusName)
}

// assumeEmitRole assumes the profile's emit role with the caller's
// credentials and returns the session's credentials: the spec's producer
// path (section B.2), one STS call.
func assumeEmitRole(ctx context.Context, cfg awssdk.Config, t Target) (awssdk.CredentialsProvider, error) {
	role, err := EmitRoleOf(t)
	if err != nil {
		return nil, &StepError{Step: StepAssumeRole, Msg: err.Error(), Err: err}
	}
	if err := callerCredentials(ctx, cfg, t); err != nil {
		return nil, err
	}
	in := &sts.AssumeRoleInput{RoleArn: awssdk.String(role.ARN), RoleSessionName: awssdk.String("snavio-send"), DurationSeconds: awssdk.Int32(emitSessionDuration)}
	if t.ExternalID != "" {
		in.ExternalId = awssdk.String(t.ExternalID)
	}
	out, err := stsClient(cfg, t).AssumeRole(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, explainAssumeRole(role.ARN, t, err)
	}
	c := out.Credentials
	if c == nil || c.AccessKeyId == nil || c.SecretAccessKey == nil {
		return nil, &StepError{Step: StepAssumeRole, Msg: fmt.Sprintf("STS answered AssumeRole of %s without credentials; check the endpoint", role.ARN)}
	}
	return credentials.NewStaticCredentialsProvider(*c.AccessKeyId, *c.SecretAccessKey, awssdk.ToString(c.SessionToken)), nil
}

// explainAssumeRole tells access denied from unreachable.
func explainAssumeRole(arn string, t Target, err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		where := "STS"
		if t.Endpoint != "" {
			where += " at " + t.Endpoint
		}
		return &StepError{Step: StepAssumeRole, Retryable: true, Msg: fmt.Sprintf("cannot reach %s (%v): check the network, the region and the endpoint", where, opErr.Err), Err: err}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		msg := strings.TrimSpace(apiErr.ErrorMessage())
		if apiErr.ErrorCode() == "AccessDenied" || apiErr.ErrorCode() == "AccessDeniedException" {
			hint := "ask the operator to add your role to the tenant's services (`snavio tenant apply`)"
			if t.ExternalID == "" {
				hint += ", and set external_id if the role's trust policy asks one"
			} else {
				hint += ", and check the profile's external_id"
			}
			return &StepError{Step: StepAssumeRole, Msg: fmt.Sprintf("access denied to the emit role %s: %s; the caller's identity is not trusted by it: %s", arn, msg, hint), Err: err}
		}
		if strings.Contains(apiErr.ErrorCode(), "Token") || strings.Contains(apiErr.ErrorCode(), "Signature") || apiErr.ErrorCode() == "InvalidClientTokenId" {
			return &StepError{Step: StepCredentials, Msg: fmt.Sprintf("STS refused the caller's credentials: %s: %s; refresh them (aws sso login) or check the aws_profile", apiErr.ErrorCode(), msg), Err: err}
		}
		return &StepError{Step: StepAssumeRole, Retryable: apiErr.ErrorFault() == smithy.FaultServer, Msg: fmt.Sprintf("STS refused to assume the emit role %s: %s: %s", arn, apiErr.ErrorCode(), msg), Err: err}
	}
	if strings.Contains(err.Error(), "retrieve credentials") {
		return &StepError{Step: StepCredentials, Msg: fmt.Sprintf("cannot resolve the caller's AWS credentials: %v", short1(err)), Err: err}
	}
	return &StepError{Step: StepAssumeRole, Msg: fmt.Sprintf("assuming the emit role %s failed: %v", arn, err), Err: err}
}

// short1 is an SDK error's last line, without the operation preamble.
func short1(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
