package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// The checks of an aws profile after config and profile, in order
// (docs/deploy.md, "Checking a profile: snavio doctor").
var awsChecks = []string{"credentials", "role", "clock skew", "bus", "stack", "tables", "snapshot", "control api", "emit role"}

// Snapshot age bounds: fresh up to the spec's stale_ttl (the routing
// cache's default, two missed runs of the one-minute schedule), a warning
// up to the cold start's default max age, past which cold starts refuse
// the snapshot and read the registry tables (lambda.DefaultSnapshotMaxAge;
// doctor_aws_test.go ties the two).
const (
	SnapshotFreshAge = cache.DefaultRoutingStale
	SnapshotMaxAge   = 30 * time.Minute
)

// doctorSession names the sessions doctor's AssumeRole calls open.
const doctorSession = "snavio-doctor"

// awsRun is one aws doctor run: the profile, its SDK configurations and
// what the checks learnt so far.
type awsRun struct {
	o   *Options
	s   *config.Settings
	pc  platform.Platform
	tgt platform.Target
	// base has the credentials the SDK finds; eff role_arn's as well,
	// what commands use.
	base, eff awssdk.Config
	// who is eff's identity.
	who *sts.GetCallerIdentityOutput
}

// ctx bounds one check's calls by --timeout.
func (a *awsRun) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.o.Timeout)
}

// checkAWS runs the aws checks after config and profile.
func checkAWS(ctx context.Context, o *Options, s *config.Settings, pc platform.Platform, add func(Check)) {
	a := &awsRun{o: o, s: s, pc: pc, tgt: pc.Target()}
	skipFrom := func(name, why string) {
		on := false
		for _, n := range awsChecks {
			on = on || n == name
			if on {
				add(Check{Name: n, Status: Skip, Detail: why})
			}
		}
	}
	load := o.AWSConfig
	if load == nil {
		load = func(ctx context.Context, t platform.Target) (awssdk.Config, error) {
			return platform.AWSConfig(ctx, t, t.Region)
		}
	}
	// base has the credentials the SDK finds, eff role_arn's too.
	noRole := a.tgt
	noRole.RoleARN = ""
	c, cancel := a.ctx(ctx)
	base, err := load(c, noRole)
	if err == nil {
		a.eff, err = load(c, a.tgt)
	}
	cancel()
	if err != nil {
		add(Check{Name: "credentials", Status: Fail, Detail: err.Error(), Fix: "set the profile's region and aws_profile (`snavio profile set " + s.ProfileName + " --region R --aws-profile P`), or AWS_PROFILE / AWS_ACCESS_KEY_ID"})
		skipFrom("role", "needs credentials")
		return
	}
	a.base = base

	// credentials, and the clock skew from the same answer's Date header.
	id, probe, err := a.identity(ctx, base)
	if err != nil {
		add(Check{Name: "credentials", Status: Fail, Detail: "STS GetCallerIdentity: " + a.explain(err), Fix: a.credentialsFix(err)})
		skipFrom("role", "needs credentials")
		return
	}
	add(Check{Name: "credentials", Status: OK, Detail: fmt.Sprintf("%s (account %s, region %s)", awssdk.ToString(id.Arn), awssdk.ToString(id.Account), base.Region)})
	skew := a.skew(probe)

	// role
	a.who = id
	if a.tgt.RoleARN == "" {
		add(Check{Name: "role", Status: Skip, Detail: "no role_arn in the profile: commands use these credentials"})
	} else {
		rid, err := a.assume(ctx, base, a.tgt.RoleARN, a.tgt.ExternalID)
		if err != nil {
			add(Check{Name: "role", Status: Fail, Detail: "STS AssumeRole of " + a.tgt.RoleARN + ": " + a.explain(err),
				Fix: "the role's trust policy must allow sts:AssumeRole by " + awssdk.ToString(id.Arn) + ", and role_arn must name it (`snavio profile set " + s.ProfileName + " --role-arn ARN`)"})
			add(skew)
			skipFrom("bus", "needs the role")
			return
		}
		a.who = rid
		add(Check{Name: "role", Status: OK, Detail: "assumed as " + awssdk.ToString(rid.Arn)})
	}
	add(skew)
	add(a.checkBus(ctx))
	add(a.checkStack(ctx))
	add(a.checkTables(ctx))
	add(a.checkSnapshot(ctx))
	add(a.checkControl(ctx))
	add(a.checkEmitRole(ctx))
}

// endpoint is the profile's endpoint (--endpoint-url) for every service
// when it has one, else the SDK's.
func (a *awsRun) endpoint(sdk *string) *string {
	if a.tgt.Endpoint != "" {
		return awssdk.String(a.tgt.Endpoint)
	}
	return sdk
}

// dateProbe is one timed STS call: the local clock around it and the
// answer's Date header.
type dateProbe struct {
	sent, received time.Time
	date           string
}

// identity calls GetCallerIdentity with cfg, timing it and keeping the
// answer's Date header.
func (a *awsRun) identity(ctx context.Context, cfg awssdk.Config) (*sts.GetCallerIdentityOutput, dateProbe, error) {
	c, cancel := a.ctx(ctx)
	defer cancel()
	var p dateProbe
	cl := sts.NewFromConfig(cfg, func(o *sts.Options) {
		o.BaseEndpoint = a.endpoint(o.BaseEndpoint)
		o.APIOptions = append(o.APIOptions, recordDate(&p.date))
	})
	// Resolve the credentials first (an AssumeRole for a role), so the
	// timed call is the one request.
	if cfg.Credentials == nil {
		return nil, p, errors.New("no AWS credentials provider in the configuration")
	}
	if _, err := cfg.Credentials.Retrieve(c); err != nil {
		return nil, p, err
	}
	p.sent = a.o.Clock.Now()
	out, err := cl.GetCallerIdentity(c, &sts.GetCallerIdentityInput{})
	p.received = a.o.Clock.Now()
	return out, p, err
}

// recordDate keeps the Date header of the raw HTTP answer.
func recordDate(date *string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("snavio-doctor-date",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if r, ok := out.RawResponse.(*smithyhttp.Response); ok {
					*date = r.Header.Get("Date")
				}
				return out, md, err
			}), middleware.Before)
	}
}

// skew judges the local clock against AWS's from STS's Date header (to
// the second), against the replay window.
func (a *awsRun) skew(p dateProbe) Check {
	t, err := http.ParseTime(p.date)
	if err != nil {
		return Check{Name: "clock skew", Status: Skip, Detail: "STS's answer had no Date header to compare the clock with"}
	}
	skew, unc := EstimateSkew(p.sent, p.received, t.Add(500*time.Millisecond))
	c := judgeSkew(skew, unc+500*time.Millisecond, a.o.ReplayWindow, "AWS")
	c.Detail += " (from STS's Date header, to the second)"
	return c
}

// explain is an SDK error in one line: the service's code and message,
// or the network failure.
func (a *awsRun) explain(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode() + ": " + strings.TrimSpace(api.ErrorMessage())
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "cannot reach AWS: " + op.Error()
	}
	return err.Error()
}

func (a *awsRun) credentialsFix(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return "check the network, the region (" + a.tgt.Region + ") and --endpoint-url"
	}
	who := "the default credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, SSO, an instance role)"
	if a.tgt.AWSProfile != "" {
		who = "AWS profile " + a.tgt.AWSProfile + " (`aws sso login --profile " + a.tgt.AWSProfile + "` refreshes SSO credentials)"
	}
	return "refresh or replace " + who + "; set another with `snavio profile set " + a.s.ProfileName + " --aws-profile NAME`"
}

// notFound reports an AWS "does not exist" answer (ResourceNotFound,
// NoSuchBucket, 404).
func notFound(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ResourceNotFoundException", "NotFound", "NoSuchBucket", "NoSuchKey":
			return true
		}
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// deployFix says how to make the env's resources.
func (a *awsRun) deployFix(field string) string {
	if a.tgt.Env != "" {
		return "deploy the stack (`snavio dispatch deploy --env " + a.tgt.Env + "`), or correct the profile's " + field
	}
	return "set the profile's " + field + " (or env) to the deployment's (`snavio profile set " + a.s.ProfileName + "`)"
}

func (a *awsRun) checkBus(ctx context.Context) Check {
	c, cancel := a.ctx(ctx)
	defer cancel()
	name := platform.BusNameOf(a.tgt)
	out, err := eventbridge.NewFromConfig(a.eff, func(o *eventbridge.Options) { o.BaseEndpoint = a.endpoint(o.BaseEndpoint) }).DescribeEventBus(c, &eventbridge.DescribeEventBusInput{Name: awssdk.String(name)})
	switch {
	case err == nil:
		return Check{Name: "bus", Status: OK, Detail: awssdk.ToString(out.Arn)}
	case notFound(err):
		return Check{Name: "bus", Status: Fail, Detail: fmt.Sprintf("no event bus %s in %s", name, a.eff.Region), Fix: a.deployFix("bus_name")}
	}
	return Check{Name: "bus", Status: Fail, Detail: "EventBridge DescribeEventBus " + name + ": " + a.explain(err), Fix: "the profile's identity (" + awssdk.ToString(a.who.Arn) + ") needs events:DescribeEventBus on it"}
}

// checkStack compares the snavio version that deployed the env's stack
// (its SnavioVersion output) with this CLI's.
func (a *awsRun) checkStack(ctx context.Context) Check {
	if a.tgt.Env == "" {
		return Check{Name: "stack", Status: Skip, Detail: "no env in the profile: the stack is snavio-<env>", Fix: "set it with `snavio profile set " + a.s.ProfileName + " --env ENV`"}
	}
	c, cancel := a.ctx(ctx)
	defer cancel()
	name := stack.Names{Env: a.tgt.Env}.Stack()
	out, err := cloudformation.NewFromConfig(a.eff, func(o *cloudformation.Options) { o.BaseEndpoint = a.endpoint(o.BaseEndpoint) }).
		DescribeStacks(c, &cloudformation.DescribeStacksInput{StackName: awssdk.String(name)})
	var api smithy.APIError
	switch {
	case err != nil && errors.As(err, &api) && (api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "does not exist") || api.ErrorCode() == "StackNotFoundException"):
		return Check{Name: "stack", Status: Fail, Detail: fmt.Sprintf("no stack %s in %s", name, a.eff.Region), Fix: a.deployFix("env")}
	case err != nil:
		return Check{Name: "stack", Status: Fail, Detail: "CloudFormation DescribeStacks " + name + ": " + a.explain(err), Fix: "the profile's identity (" + awssdk.ToString(a.who.Arn) + ") needs cloudformation:DescribeStacks on it"}
	case len(out.Stacks) == 0:
		return Check{Name: "stack", Status: Fail, Detail: fmt.Sprintf("no stack %s in %s", name, a.eff.Region), Fix: a.deployFix("env")}
	}
	st := out.Stacks[0]
	status := string(st.StackStatus)
	if !strings.HasSuffix(status, "_COMPLETE") || strings.Contains(status, "ROLLBACK") && status != "UPDATE_ROLLBACK_COMPLETE" {
		return Check{Name: "stack", Status: Fail, Detail: name + " is " + status, Fix: "see its events (`aws cloudformation describe-stack-events --stack-name " + name + "`) and deploy again"}
	}
	deployed := ""
	for _, o := range st.Outputs {
		if awssdk.ToString(o.OutputKey) == stack.VersionOutput {
			deployed = awssdk.ToString(o.OutputValue)
		}
	}
	mine := build.Current().Version
	switch {
	case deployed == "":
		return Check{Name: "stack", Status: Warn, Detail: name + " (" + status + ") does not say which snavio deployed it (an older snavio did)", Fix: "deploy with this snavio (`snavio dispatch deploy --env " + a.tgt.Env + "`)"}
	case deployed != mine:
		return Check{Name: "stack", Status: Warn, Detail: fmt.Sprintf("%s (%s) was deployed by snavio %s; this is snavio %s", name, status, deployed, mine),
			Fix: "deploy with this snavio (`snavio dispatch deploy --env " + a.tgt.Env + "`), or use snavio " + deployed}
	}
	return Check{Name: "stack", Status: OK, Detail: fmt.Sprintf("%s (%s), deployed by this snavio (%s)", name, status, mine)}
}

// tableName is a table of the profile: table_prefix and the kind, else
// the env's name (the store's and the stack's one rule).
func (a *awsRun) tableName(kind string) string {
	if a.tgt.TablePrefix != "" {
		return a.tgt.TablePrefix + kind
	}
	return stack.Names{Env: a.tgt.Env}.Table(kind)
}

func (a *awsRun) checkTables(ctx context.Context) Check {
	if a.tgt.TablePrefix == "" && a.tgt.Env == "" {
		return Check{Name: "tables", Status: Skip, Detail: "no table_prefix or env in the profile", Fix: "set env (`snavio profile set " + a.s.ProfileName + " --env ENV`) to check the deployment's tables"}
	}
	c, cancel := a.ctx(ctx)
	defer cancel()
	// The SDK checks a CRC32 of each answer when closing its body, and
	// an error answer it decoded without reading through the check logs a
	// warning on stderr for every missing table; descriptions need no CRC
	// over TLS.
	cl := dynamodb.NewFromConfig(a.eff, func(o *dynamodb.Options) {
		o.BaseEndpoint = a.endpoint(o.BaseEndpoint)
		o.DisableValidateResponseChecksum = true
	})
	var problems, fixes, names, ttl []string
	missing := false
	for _, tb := range stack.Tables {
		name := a.tableName(tb.Kind)
		names = append(names, name)
		out, err := cl.DescribeTable(c, &dynamodb.DescribeTableInput{TableName: awssdk.String(name)})
		if err != nil {
			if notFound(err) {
				problems, missing = append(problems, name+" does not exist"), true
			} else {
				problems = append(problems, "DescribeTable "+name+": "+a.explain(err))
			}
			continue
		}
		if st := out.Table.TableStatus; st != ddbtypes.TableStatusActive {
			problems = append(problems, fmt.Sprintf("%s is %s, not ACTIVE", name, st))
		}
		if !tb.TTL {
			continue
		}
		ttl = append(ttl, tb.Kind)
		t, err := cl.DescribeTimeToLive(c, &dynamodb.DescribeTimeToLiveInput{TableName: awssdk.String(name)})
		if err != nil {
			problems = append(problems, "DescribeTimeToLive "+name+": "+a.explain(err))
			continue
		}
		d := t.TimeToLiveDescription
		if d == nil || d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || awssdk.ToString(d.AttributeName) != stack.TTLAttribute {
			status, attr := "DISABLED", ""
			if d != nil {
				status, attr = string(d.TimeToLiveStatus), awssdk.ToString(d.AttributeName)
			}
			problems = append(problems, fmt.Sprintf("TTL of %s is %s on %q, not ENABLED on %s", name, status, attr, stack.TTLAttribute))
			fixes = append(fixes, fmt.Sprintf("`aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=true,AttributeName=%s`", name, stack.TTLAttribute))
		}
	}
	if len(problems) == 0 {
		return Check{Name: "tables", Status: OK, Detail: fmt.Sprintf("%s ACTIVE; TTL on %s for %s", strings.Join(names, ", "), stack.TTLAttribute, strings.Join(ttl, ", "))}
	}
	if missing {
		fix := a.deployFix("table_prefix")
		if p := a.tgt.TablePrefix; p != "" && !strings.ContainsAny(p[len(p)-1:], "-_.") {
			fix += fmt.Sprintf(" (table_prefix is put before the kind as it is: %q makes %s)", p+"-", (p + "-" + stack.TableFlow))
		}
		fixes = append([]string{fix}, fixes...)
	}
	if len(fixes) == 0 {
		fixes = []string{"the profile's identity (" + awssdk.ToString(a.who.Arn) + ") needs dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on the tables"}
	}
	return Check{Name: "tables", Status: Fail, Detail: strings.Join(problems, "; "), Fix: strings.Join(fixes, "; ")}
}

// snapshotBucket is the profile's snapshot_bucket, else the env's in the
// identity's account.
func (a *awsRun) snapshotBucket() string {
	if a.tgt.SnapshotBucket != "" || a.tgt.Env == "" {
		return a.tgt.SnapshotBucket
	}
	return stack.Names{Env: a.tgt.Env}.SnapshotBucket(awssdk.ToString(a.who.Account))
}

func (a *awsRun) checkSnapshot(ctx context.Context) Check {
	bucket := a.snapshotBucket()
	if bucket == "" {
		return Check{Name: "snapshot", Status: Skip, Detail: "no snapshot_bucket or env in the profile", Fix: "set env (`snavio profile set " + a.s.ProfileName + " --env ENV`) to check the deployment's snapshots"}
	}
	c, cancel := a.ctx(ctx)
	defer cancel()
	cl := s3.NewFromConfig(a.eff, func(o *s3.Options) { o.BaseEndpoint = a.endpoint(o.BaseEndpoint) })
	if _, err := cl.HeadBucket(c, &s3.HeadBucketInput{Bucket: awssdk.String(bucket)}); err != nil {
		if notFound(err) {
			return Check{Name: "snapshot", Status: Fail, Detail: "no bucket " + bucket, Fix: a.deployFix("snapshot_bucket")}
		}
		return Check{Name: "snapshot", Status: Fail, Detail: "S3 HeadBucket " + bucket + ": " + a.explain(err),
			Fix: "the snapshot bucket is readable only by the dispatcher roles and roles under /snavio/<env>/operator/: set role_arn to the operator role"}
	}
	key := strings.TrimPrefix(snapshot.DefaultPaths().Full, "/")
	where := "s3://" + bucket + "/" + key
	fnFix := "the snapshot function publishes every minute: check it and its log group"
	if a.tgt.Env != "" {
		fn := stack.Names{Env: a.tgt.Env}.Function(stack.FnSnapshot)
		fnFix = "the snapshot function publishes every minute: check " + fn + " and its log group /aws/lambda/" + fn
	}
	out, err := cl.HeadObject(c, &s3.HeadObjectInput{Bucket: awssdk.String(bucket), Key: awssdk.String(key)})
	switch {
	case notFound(err):
		return Check{Name: "snapshot", Status: Fail, Detail: "no snapshot at " + where + ": cold starts read the registry tables instead", Fix: fnFix}
	case err != nil:
		return Check{Name: "snapshot", Status: Fail, Detail: "S3 HeadObject " + where + ": " + a.explain(err), Fix: "the snapshot bucket is readable only by the dispatcher roles and roles under /snavio/<env>/operator/: set role_arn to the operator role"}
	case out.LastModified == nil:
		return Check{Name: "snapshot", Status: Fail, Detail: "S3 answered no Last-Modified for " + where, Fix: "check that the endpoint is S3"}
	}
	age := max(a.o.Clock.Now().Sub(*out.LastModified), 0).Round(time.Second)
	d := fmt.Sprintf("%s published %s ago", where, age)
	switch {
	case age > SnapshotMaxAge:
		return Check{Name: "snapshot", Status: Fail, Detail: fmt.Sprintf("%s: older than %s, so cold starts refuse it and read the registry tables", d, SnapshotMaxAge), Fix: fnFix}
	case age > SnapshotFreshAge:
		return Check{Name: "snapshot", Status: Warn, Detail: fmt.Sprintf("%s: older than the stale TTL (%s), so the snapshot function has missed runs", d, SnapshotFreshAge), Fix: fnFix}
	}
	return Check{Name: "snapshot", Status: OK, Detail: d}
}

// checkControl asks the control API who the profile's identity is,
// through the platform.
func (a *awsRun) checkControl(ctx context.Context) Check {
	c, cancel := a.ctx(ctx)
	defer cancel()
	who, err := a.pc.Whoami(c)
	var na *platform.NotAvailableError
	switch {
	case errors.As(err, &na):
		return Check{Name: "control api", Status: Skip, Detail: err.Error()}
	case err != nil:
		fix := "set the profile's control_url to the stack's ControlApiUrl output (`snavio profile set " + a.s.ProfileName + " --control-url URL`)"
		var ce *platform.CredentialsError
		switch st := platform.StatusOf(err); {
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			fix = "set role_arn to the operator role or a tenant's control role (`snavio profile set " + a.s.ProfileName + " --role-arn ARN`); the caller needs lambda:InvokeFunctionUrl on the control function"
		case errors.As(err, &ce):
			fix = "fix the credentials first (the credentials and role checks)"
		case st != 0:
			fix = "run the same version of snavio as the deployment (`snavio version`, `snavio dispatch deploy`)"
		}
		return Check{Name: "control api", Status: Fail, Detail: err.Error(), Fix: fix}
	}
	return Check{Name: "control api", Status: OK, Detail: describeWho(who.Principal, who.Operator, who.Tenant)}
}

// describeWho is a control-API identity in words.
func describeWho(principal string, operator bool, tenant string) string {
	d := "accepted as " + principal
	if operator {
		d += " (operator)"
	} else if tenant != "" {
		d += " (tenant " + tenant + ")"
	}
	return d
}

func (a *awsRun) checkEmitRole(ctx context.Context) Check {
	if a.tgt.EmitRoleARN == "" {
		return Check{Name: "emit role", Status: Skip, Detail: "no emit_role_arn in the profile"}
	}
	who, err := a.assume(ctx, a.eff, a.tgt.EmitRoleARN, a.tgt.ExternalID)
	if err != nil {
		return Check{Name: "emit role", Status: Fail, Detail: "STS AssumeRole of " + a.tgt.EmitRoleARN + ": " + a.explain(err),
			Fix: "the emit role's trust policy must allow sts:AssumeRole by " + awssdk.ToString(a.who.Arn) + " (with the external_id it asks, if any): `snavio tenant add-service` adds a service's role"}
	}
	return Check{Name: "emit role", Status: OK, Detail: "assumed as " + awssdk.ToString(who.Arn)}
}

// assume calls AssumeRole of role with cfg's credentials, for a short
// session named snavio-doctor, and returns the session's identity (its
// account from the role's ARN).
func (a *awsRun) assume(ctx context.Context, cfg awssdk.Config, role, externalID string) (*sts.GetCallerIdentityOutput, error) {
	c, cancel := a.ctx(ctx)
	defer cancel()
	in := &sts.AssumeRoleInput{RoleArn: awssdk.String(role), RoleSessionName: awssdk.String(doctorSession), DurationSeconds: awssdk.Int32(900)}
	if externalID != "" {
		in.ExternalId = awssdk.String(externalID)
	}
	out, err := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = a.endpoint(o.BaseEndpoint) }).AssumeRole(c, in)
	if err != nil {
		return nil, err
	}
	if out.AssumedRoleUser == nil {
		return nil, errors.New("STS answered AssumeRole without the assumed role's ARN")
	}
	var account string
	if f := strings.Split(role, ":"); len(f) > 4 {
		account = f[4]
	}
	return &sts.GetCallerIdentityOutput{Arn: out.AssumedRoleUser.Arn, Account: awssdk.String(account)}, nil
}
