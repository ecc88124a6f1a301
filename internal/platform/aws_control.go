package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/sdkbody"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// The aws platform's control operations go through the control API's
// Lambda Function URL (the profile's control_url), with the same client
// as a local profile (Local) and SigV4 in place of a bearer token.

// SigningService is the SigV4 service name of a Lambda Function URL.
const SigningService = "lambda"

// AWSOptions tune NewAWS. The zero value is the production setting.
type AWSOptions struct {
	// HTTPClient calls the control API (nil: a client with a 60 s
	// timeout).
	HTTPClient *http.Client
	// Clock gives the signing time (nil: the system clock).
	Clock clock.Clock
	// LoadOptions are added to the SDK configuration's (tests: static
	// credentials, an STS endpoint).
	LoadOptions []func(*awsconfig.LoadOptions) error
}

// NewAWS returns the platform of the aws target t. It loads no SDK
// configuration until a method needs it.
func NewAWS(t Target, o AWSOptions) *AWS {
	return &AWS{target: t, control: awsControl{opts: o}}
}

// awsControl is the aws platform's control API client, built on first use.
type awsControl struct {
	opts AWSOptions
	once sync.Once
	api  *Local
	err  error
}

// api returns the control API client; what names the operation as the
// CLI spells it, for the error of a profile without control_url.
func (c *AWS) api(what string) (*Local, error) {
	if c.target.ControlURL == "" {
		name := firstNonEmpty(c.target.Profile, "NAME")
		return nil, &NotAvailableError{What: what, Reason: fmt.Sprintf("the aws profile has no control_url: set it with `snavio profile set %s --control-url URL`, URL being the ControlApiUrl output of `snavio dispatch deploy`", name)}
	}
	c.control.once.Do(func() { c.control.api, c.control.err = newAWSControl(c.target, c.control.opts) })
	return c.control.api, c.control.err
}

func newAWSControl(t Target, o AWSOptions) (*Local, error) {
	if err := config.ValidateControlURL(t.ControlURL); err != nil {
		return nil, fmt.Errorf("%w (set it with `snavio profile set NAME --control-url URL` or %s)", err, config.EnvName("control_url"))
	}
	u, _ := url.Parse(t.ControlURL) // valid: checked above
	clk := o.Clock
	if clk == nil {
		clk = clock.System()
	}
	auth := &sigV4{target: t, region: firstNonEmpty(FunctionURLRegion(u.Hostname()), t.Region), now: clk.Now, load: o.LoadOptions, signer: v4.NewSigner()}
	api := newControlClient(t.ControlURL, auth, awsHost(t), o.HTTPClient)
	api.target = t
	return api, nil
}

// FunctionURLRegion is the region of a Lambda Function URL's host
// (<id>.lambda-url.<region>.on.aws), or "" when host is not one.
func FunctionURLRegion(host string) string {
	rest, ok := strings.CutSuffix(strings.ToLower(host), ".on.aws")
	if !ok {
		return ""
	}
	labels := strings.Split(rest, ".")
	if len(labels) != 3 || labels[0] == "" || labels[1] != "lambda-url" {
		return ""
	}
	r := labels[2]
	if len(r) < 3 || len(r) > 32 || r[0] == '-' || r[len(r)-1] == '-' {
		return ""
	}
	for _, ch := range r {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '-' {
			return ""
		}
	}
	return r
}

// awsHost is what errors say of the control API on aws.
func awsHost(t Target) hostMessages {
	env := firstNonEmpty(t.Env, "<env>")
	return hostMessages{
		What:        "the control API",
		Unreachable: "check the profile's control_url (the ControlApiUrl output of `snavio dispatch deploy`; `snavio profile show`) and the network",
		Credential:  "the caller is the profile's IAM identity: the role_arn role when set (assumed with STS), else the AWS credentials of aws_profile or the environment",
		Forbidden: fmt.Sprintf("call it as a role the control API knows, set as the profile's role_arn: the operator role snavio-%s-operator, or a tenant's control role snavio-%s-tenant-<tenant>; the caller needs lambda:InvokeFunctionUrl on the control function",
			env, env),
		Unauthorized: fmt.Sprintf("the control API knows no principal for this IAM identity: assume the operator role snavio-%s-operator or a tenant's control role snavio-%s-tenant-<tenant> (the profile's role_arn)", env, env),
	}
}

// sigV4 authorizes control-API requests with the SDK's SigV4 signer
// (service lambda), with the credentials of the profile's AWS
// configuration, loaded on first use.
type sigV4 struct {
	target Target
	now    func() time.Time
	load   []func(*awsconfig.LoadOptions) error
	signer *v4.Signer

	once   sync.Once
	region string // the Function URL's or the profile's; else the SDK's, once loaded
	creds  awssdk.CredentialsProvider
	err    error
}

func (s *sigV4) credentials(ctx context.Context) (awssdk.Credentials, error) {
	s.once.Do(func() {
		cfg, err := AWSConfig(ctx, s.target, s.region, s.load...)
		if err != nil {
			s.err = err
			return
		}
		s.region, s.creds = cfg.Region, cfg.Credentials
	})
	if s.err != nil {
		return awssdk.Credentials{}, s.err
	}
	c, err := s.creds.Retrieve(ctx)
	var ce *CredentialsError
	if errors.As(err, &ce) { // not the cache's wrapping
		return c, ce
	}
	return c, err
}

func (s *sigV4) authorize(ctx context.Context, req *http.Request, body []byte) error {
	c, err := s.credentials(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := s.signer.SignHTTP(ctx, c, req, hash, SigningService, s.region, s.now()); err != nil {
		return fmt.Errorf("signing the request to %s: %w", req.URL.Path, err)
	}
	return nil
}

func (s *sigV4) check(ctx context.Context) error {
	_, err := s.credentials(ctx)
	return err
}

// ErrNoRegion: AWSConfig found no region to call AWS in.
var ErrNoRegion = errors.New("no AWS region")

// AWSConfig loads the SDK configuration of aws target t: the default
// credential chain (or the AWS profile aws_profile), region (else the
// SDK's), t.Endpoint as every service's endpoint when set, and, when role_arn is set, that role's credentials assumed
// with STS (with external_id when set). A failure to get credentials is
// a *CredentialsError naming the step. Nothing is called before the
// first Retrieve of the credentials.
func AWSConfig(ctx context.Context, t Target, region string, extra ...func(*awsconfig.LoadOptions) error) (awssdk.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if t.AWSProfile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(t.AWSProfile))
	}
	if t.Endpoint != "" {
		// --endpoint-url: every service at one endpoint (an emulator).
		opts = append(opts, awsconfig.WithBaseEndpoint(t.Endpoint))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, append(opts, extra...)...)
	if err != nil {
		return awssdk.Config{}, &CredentialsError{Step: StepConfig, Profile: t.AWSProfile, Err: err}
	}
	sdkbody.Use(&cfg)
	if cfg.Region == "" {
		return awssdk.Config{}, fmt.Errorf("%w: set one with --region, SNAVIO_REGION, the profile's region, or the AWS profile's region", ErrNoRegion)
	}
	p := &stepCredentials{base: cfg.Credentials, profile: t.AWSProfile}
	if t.RoleARN != "" {
		p.role = t.RoleARN
		p.assumed = stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), t.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			if t.ExternalID != "" {
				o.ExternalID = awssdk.String(t.ExternalID)
			}
		})
	}
	cfg.Credentials = awssdk.NewCredentialsCache(p)
	return cfg, nil
}

// The steps of getting AWS credentials (CredentialsError.Step).
const (
	StepConfig      = "AWS configuration"
	StepCredentials = "credentials"
	StepAssumeRole  = "AssumeRole"
)

// CredentialsError is a failure to get the credentials an aws profile
// signs with; its message starts with Step, as a StepError's does, at Step: loading the configuration, the base credentials
// (default chain or aws_profile), or assuming Role.
type CredentialsError struct {
	Step    string
	Profile string // aws_profile
	Role    string // role_arn, for StepAssumeRole
	Err     error
}

func (e *CredentialsError) Error() string {
	switch e.Step {
	case StepConfig:
		return fmt.Sprintf("%s: cannot load it (aws_profile %q): %v; check ~/.aws/config and ~/.aws/credentials, or the profile's aws_profile", e.Step, e.Profile, e.Err)
	case StepAssumeRole:
		return fmt.Sprintf("%s: assuming %s (the profile's role_arn) failed: %s; check that your identity may assume it (its trust policy) and the profile's external_id", e.Step, e.Role, awsErrorText(e.Err))
	}
	return fmt.Sprintf("%s: none found: %s; configure them (`aws configure`, AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or `aws sso login`), or set the profile's aws_profile", e.Step, awsErrorText(e.Err))
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// awsErrorText is an SDK error in a line: the service's code and
// message, or the network failure, else the error.
func awsErrorText(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode() + ": " + strings.TrimSpace(apiErr.ErrorMessage())
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return "cannot reach STS (" + opErr.Err.Error() + ")"
	}
	return err.Error()
}

// stepCredentials gets the base credentials, then (with a role) the
// role's, and tells which step failed.
type stepCredentials struct {
	base    awssdk.CredentialsProvider
	profile string
	role    string
	assumed awssdk.CredentialsProvider
}

func (p *stepCredentials) Retrieve(ctx context.Context) (awssdk.Credentials, error) {
	if p.base == nil {
		return awssdk.Credentials{}, &CredentialsError{Step: StepCredentials, Profile: p.profile, Err: errors.New("the SDK found none")}
	}
	c, err := p.base.Retrieve(ctx)
	if err != nil {
		return awssdk.Credentials{}, &CredentialsError{Step: StepCredentials, Profile: p.profile, Err: err}
	}
	if p.assumed == nil {
		return c, nil
	}
	c, err = p.assumed.Retrieve(ctx)
	if err != nil {
		return awssdk.Credentials{}, &CredentialsError{Step: StepAssumeRole, Profile: p.profile, Role: p.role, Err: err}
	}
	return c, nil
}
