package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/cfnfake"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/lambda"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

var emu awstest.Emulators

// TestMain stops the emulators after the tests.
func TestMain(m *testing.M) {
	defer emu.Close()
	m.Run()
}

// kumo's account, which its GetCallerIdentity answers.
const kumoAccount = "000000000000"

// awsDeployment is an env's resources on the emulators: the bus on kumo,
// the four tables on DynamoDB Local, the snapshot bucket on a gofakes3
// whose clock is fixed at snapshotAt.
type awsDeployment struct {
	env                   string
	noBus, noTTL, noTable bool
	noBucket, noSnapshot  bool
	snapshotAt            time.Time
	// stackVersion is the SnavioVersion output of the env's stack (on
	// the CloudFormation fake); "-" deploys no stack, "" this snavio's.
	stackVersion string
}

// deploy makes d's resources and points the SDK's environment at the
// emulators (kumo for STS and EventBridge unless stsURL is set).
func deploy(t *testing.T, d awsDeployment, stsURL string) {
	t.Helper()
	ctx := context.Background()
	ddb := emu.DynamoDB(t)
	k := emu.Kumo()
	ts := gofakes3.FixedTimeSource(d.snapshotAt)
	fs3 := httptest.NewServer(gofakes3.New(s3mem.New(s3mem.WithTimeSource(ts)), gofakes3.WithTimeSource(ts), gofakes3.WithTimeSkewLimit(0)).Server())
	t.Cleanup(fs3.Close)
	dir := t.TempDir()
	for key, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "c"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "k"),
		"AWS_ENDPOINT_URL": k.Endpoint, "AWS_ENDPOINT_URL_STS": stsURL, "AWS_ENDPOINT_URL_DYNAMODB": ddb.Endpoint, "AWS_ENDPOINT_URL_S3": fs3.URL} {
		t.Setenv(key, v)
	}
	if stsURL == "" {
		t.Setenv("AWS_ENDPOINT_URL_STS", k.Endpoint)
	}
	n := stack.Names{Env: d.env}
	// CloudFormation is the deploy package's fake (kumo's has no outputs).
	cfn := cfnfake.New()
	cfnSrv := httptest.NewServer(cfn)
	t.Cleanup(cfnSrv.Close)
	t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", cfnSrv.URL)
	switch d.stackVersion {
	case "-":
	case "":
		cfn.PutStack(n.Stack(), "UPDATE_COMPLETE", map[string]string{stack.VersionOutput: build.Current().Version})
	default:
		cfn.PutStack(n.Stack(), "UPDATE_COMPLETE", map[string]string{stack.VersionOutput: d.stackVersion})
	}
	if !d.noBus {
		eb := eventbridge.NewFromConfig(k.Config(), func(o *eventbridge.Options) { o.BaseEndpoint = awssdk.String(k.Endpoint) })
		if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: awssdk.String(n.Bus())}); err != nil {
			t.Fatal(err)
		}
	}
	db := dynamodb.NewFromConfig(ddb.Config(), ddb.ClientOptions()...)
	for _, tb := range stack.Tables {
		if d.noTable && tb.Kind == stack.TableOutbox {
			continue
		}
		if _, err := db.CreateTable(ctx, awsstore.TableInput(n.Table(tb.Kind))); err != nil {
			t.Fatal(err)
		}
		if tb.TTL && !(d.noTTL && tb.Kind == stack.TableFlow) {
			_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: awssdk.String(n.Table(tb.Kind)),
				TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: awssdk.String(stack.TTLAttribute), Enabled: awssdk.Bool(true)}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.noBucket {
		return
	}
	c := s3.NewFromConfig(k.Config(), func(o *s3.Options) { o.BaseEndpoint = awssdk.String(fs3.URL); o.UsePathStyle = true })
	bucket := n.SnapshotBucket(kumoAccount)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: awssdk.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if !d.noSnapshot {
		key := strings.TrimPrefix(snapshot.DefaultPaths().Full, "/")
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: awssdk.String(bucket), Key: awssdk.String(key), Body: strings.NewReader("{}")}); err != nil {
			t.Fatal(err)
		}
	}
}

// whoami stands in for the control API's Whoami, which another package
// implements over the Function URL.
type whoami struct {
	platform.Platform
	who wire.Whoami
	err error
}

func (w whoami) Whoami(context.Context) (wire.Whoami, error) { return w.who, w.err }

// awsOptions are doctor's options for an aws profile of env, on a fake
// clock at now.
func awsOptions(t *testing.T, s *config.Settings, now time.Time, wrap func(platform.Platform) platform.Platform) (*Options, *clock.Fake) {
	t.Helper()
	dir := t.TempDir()
	paths := config.Paths{ConfigFile: filepath.Join(dir, "config.yaml"), DataDir: dir}
	s.ConfigFile, s.ProfileName, s.Kind, s.ProfileOrigin = paths.ConfigFile, "prod", config.KindAWS, config.FromFlag
	if s.BusName == "" {
		s.BusName = config.DefaultBusName // as the configuration defaults it
	}
	clk := clock.NewFake(now)
	return &Options{
		Paths:    func() (config.Paths, error) { return paths, nil },
		Config:   func() (*config.File, error) { return config.Load(paths.ConfigFile) },
		Settings: func() (*config.Settings, error) { return s, nil },
		Platform: func() (platform.Platform, error) {
			p, err := platform.New(s, nil)
			if err != nil || wrap == nil {
				return p, err
			}
			return wrap(p), nil
		},
		Clock: clk, Timeout: 10 * time.Second, ReplayWindow: DefaultReplayWindow,
	}, clk
}

func TestAWSDoctorAllOK(t *testing.T) {
	env := emu.UniqueName()
	now := time.Now().Truncate(time.Second)
	deploy(t, awsDeployment{env: env, snapshotAt: now.Add(-30 * time.Second)}, "")
	s := &config.Settings{Region: "us-east-1", Env: env, RoleARN: "arn:aws:iam::000000000000:role/snavio-" + env + "-operator",
		EmitRoleARN: "arn:aws:iam::000000000000:role/snavio-" + env + "-emit-acme", ExternalID: "acme-ext"}
	o, _ := awsOptions(t, s, now, func(p platform.Platform) platform.Platform {
		return whoami{Platform: p, who: wire.Whoami{Principal: "arn:aws:sts::000000000000:assumed-role/op/x", Operator: true}}
	})
	calls := &awstest.Calls{}
	o.AWSConfig = func(ctx context.Context, t platform.Target) (awssdk.Config, error) {
		// Counted from the load on, so that the SDK's own AssumeRole of
		// role_arn counts too.
		return platform.AWSConfig(ctx, t, t.Region, awsconfig.WithAPIOptions([]func(*middleware.Stack) error{calls.Count}))
	}
	r := check(context.Background(), o)
	// GetCallerIdentity, AssumeRole of role_arn by doctor and again by the
	// SDK's provider for the checks after it, DescribeEventBus,
	// DescribeStacks, 4 DescribeTable, 2 DescribeTimeToLive, HeadBucket,
	// HeadObject, AssumeRole of the emit role.
	if c := calls.Take(); c.Total() != 14 {
		t.Errorf("%d AWS calls: %s", c.Total(), c)
	}
	got := statuses(r)
	want := []string{"config", "profile", "credentials", "role", "clock skew", "bus", "stack", "tables", "snapshot", "control api", "emit role"}
	if len(r.Checks) != len(want) {
		t.Fatalf("%d checks: %+v", len(r.Checks), r.Checks)
	}
	for i, n := range want {
		if c := r.Checks[i]; c.Name != n || c.Status != OK {
			t.Errorf("check %d = %+v, want %s ok", i, c, n)
		}
	}
	if !r.OK {
		t.Fatalf("not OK: %+v", r.Checks)
	}
	for n, sub := range map[string]string{
		"credentials": "(account 000000000000, region us-east-1)",
		"role":        "assumed as arn:aws:sts::000000000000:assumed-role/snavio-" + env + "-operator/snavio-doctor",
		"bus":         "snavio-" + env + "-command-bus",
		"tables":      "snavio-" + env + "-flow, snavio-" + env + "-registry, snavio-" + env + "-changelog, snavio-" + env + "-outbox ACTIVE; TTL on expires_at for flow, outbox",
		"snapshot":    "s3://snavio-" + env + "-snap-000000000000/snavio/registry/snapshot/latest.json published 30s ago",
		"control api": "accepted as arn:aws:sts::000000000000:assumed-role/op/x (operator)",
		"emit role":   "assumed-role/snavio-" + env + "-emit-acme/snavio-doctor",
		"clock skew":  "STS's Date header",
	} {
		if !strings.Contains(got[n].Detail, sub) {
			t.Errorf("%s detail %q, want %q", n, got[n].Detail, sub)
		}
	}
}

func TestAWSDoctorFailures(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		d      awsDeployment
		clock  time.Duration // the fake clock's offset from now
		whoErr error
		want   map[string]string
		detail map[string]string
	}{
		{name: "no bus", d: awsDeployment{noBus: true},
			want: map[string]string{"bus": Fail, "tables": OK, "snapshot": OK}, detail: map[string]string{"bus": "no event bus snavio-"}},
		{name: "a table missing, TTL off", d: awsDeployment{noTable: true, noTTL: true},
			want:   map[string]string{"bus": OK, "tables": Fail},
			detail: map[string]string{"tables": "-outbox does not exist", "bus": "command-bus"}},
		{name: "no bucket", d: awsDeployment{noBucket: true},
			want: map[string]string{"snapshot": Fail}, detail: map[string]string{"snapshot": "no bucket snavio-"}},
		{name: "no snapshot", d: awsDeployment{noSnapshot: true},
			want: map[string]string{"snapshot": Fail}, detail: map[string]string{"snapshot": "no snapshot at s3://"}},
		{name: "stale snapshot", d: awsDeployment{snapshotAt: now.Add(-10 * time.Minute)},
			want: map[string]string{"snapshot": Warn}, detail: map[string]string{"snapshot": "older than the stale TTL (3m0s)"}},
		{name: "expired snapshot", d: awsDeployment{snapshotAt: now.Add(-time.Hour)},
			want: map[string]string{"snapshot": Fail}, detail: map[string]string{"snapshot": "cold starts refuse it"}},
		{name: "no stack", d: awsDeployment{stackVersion: "-"},
			want: map[string]string{"stack": Fail, "bus": OK}, detail: map[string]string{"stack": "no stack snavio-"}},
		{name: "stack of another snavio", d: awsDeployment{stackVersion: "v0.0.1"},
			want: map[string]string{"stack": Warn}, detail: map[string]string{"stack": "was deployed by snavio v0.0.1; this is snavio "}},
		{name: "clock skew", clock: 55 * time.Second,
			want: map[string]string{"clock skew": Fail, "bus": OK}, detail: map[string]string{"clock skew": "ahead of AWS"}},
		{name: "control api refuses", whoErr: &platform.Error{Msg: "the control API refused the caller (403)"},
			want: map[string]string{"control api": Fail}, detail: map[string]string{"control api": "refused the caller"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := emu.UniqueName()
			tc.d.env = env
			if tc.d.snapshotAt.IsZero() {
				tc.d.snapshotAt = now
			}
			deploy(t, tc.d, "")
			s := &config.Settings{Region: "us-east-1", Env: env}
			o, _ := awsOptions(t, s, now.Add(tc.clock), func(p platform.Platform) platform.Platform {
				if tc.whoErr == nil {
					return p
				}
				return whoami{Platform: p, err: tc.whoErr}
			})
			r := check(context.Background(), o)
			got := statuses(r)
			for n, want := range tc.want {
				if got[n].Status != want {
					t.Errorf("%s = %+v, want %s", n, got[n], want)
				}
				if want == Fail && got[n].Fix == "" {
					t.Errorf("%s failed without a fix", n)
				}
			}
			for n, sub := range tc.detail {
				if !strings.Contains(got[n].Detail, sub) {
					t.Errorf("%s detail %q, want %q", n, got[n].Detail, sub)
				}
			}
			failed := false
			for _, st := range tc.want {
				failed = failed || st == Fail
			}
			if r.OK == failed {
				t.Errorf("OK = %v with %+v", r.OK, r.Checks)
			}
			// Without an emit role or a control API, those are skipped.
			if tc.whoErr == nil && got["control api"].Status != Skip || got["emit role"].Status != Skip {
				t.Errorf("control api %+v, emit role %+v", got["control api"], got["emit role"])
			}
		})
	}
}

// fakeSTS answers STS's query protocol for the refusals kumo never
// gives (it accepts every credential and every role): GetCallerIdentity
// as alice in kumo's account unless badCreds, and every AssumeRole
// refused.
func fakeSTS(t *testing.T, badCreds bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "text/xml")
		refuse := func(code, msg string) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>r1</RequestId></ErrorResponse>`, code, msg)
		}
		switch {
		case r.Form.Get("Action") == "GetCallerIdentity" && !badCreds:
			fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::%s:user/alice</Arn><UserId>AIDAALICE</UserId><Account>%s</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`, kumoAccount, kumoAccount)
		case r.Form.Get("Action") == "GetCallerIdentity":
			refuse("InvalidClientTokenId", "The security token included in the request is invalid.")
		default:
			refuse("AccessDenied", "User: arn:aws:iam::000000000000:user/alice is not authorized to perform: sts:AssumeRole on resource: "+r.Form.Get("RoleArn"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAWSDoctorRefusedByIAM(t *testing.T) {
	now := time.Now()
	role := "arn:aws:iam::000000000000:role/ops"
	emit := "arn:aws:iam::000000000000:role/snavio-x-emit-acme"
	for _, tc := range []struct {
		name     string
		badCreds bool
		role     string
		want     map[string]string
	}{
		{"credentials refused", true, "", map[string]string{"credentials": Fail, "role": Skip, "bus": Skip, "emit role": Skip}},
		{"role refused", false, role, map[string]string{"credentials": OK, "role": Fail, "clock skew": OK, "bus": Skip, "emit role": Skip}},
		{"emit role refused", false, "", map[string]string{"credentials": OK, "role": Skip, "bus": OK, "tables": OK, "snapshot": OK, "emit role": Fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := emu.UniqueName()
			deploy(t, awsDeployment{env: env, snapshotAt: now}, fakeSTS(t, tc.badCreds))
			s := &config.Settings{Region: "us-east-1", Env: env, RoleARN: tc.role, EmitRoleARN: emit}
			o, _ := awsOptions(t, s, now, nil)
			r := check(context.Background(), o)
			got := statuses(r)
			for n, want := range tc.want {
				if got[n].Status != want {
					t.Errorf("%s = %+v, want %s", n, got[n], want)
				}
				if want == Fail && (got[n].Fix == "" || !strings.Contains(got[n].Detail, map[bool]string{true: "InvalidClientTokenId", false: "AccessDenied"}[tc.badCreds])) {
					t.Errorf("%s = %+v: want SDK's code and a fix", n, got[n])
				}
			}
			if r.OK {
				t.Error("OK with a refusal")
			}
		})
	}
}

// The snapshot's bounds are the spec's stale TTL and the cold start's
// own default.
func TestSnapshotBoundsAreTheColdStarts(t *testing.T) {
	if SnapshotMaxAge != lambda.DefaultSnapshotMaxAge {
		t.Errorf("SnapshotMaxAge %v, the cold start's %v", SnapshotMaxAge, lambda.DefaultSnapshotMaxAge)
	}
}

func TestAWSDoctorCredentialsUnloadable(t *testing.T) {
	o, _ := awsOptions(t, &config.Settings{Region: "us-east-1"}, time.Now(), nil)
	o.AWSConfig = func(context.Context, platform.Target) (awssdk.Config, error) {
		return awssdk.Config{}, errors.New("cannot load the AWS configuration (aws_profile \"nope\"): profile not found")
	}
	r := check(context.Background(), o)
	if c := statuses(r)["credentials"]; c.Status != Fail || c.Fix == "" || statuses(r)["bus"].Status != Skip || r.OK {
		t.Fatalf("%+v", r.Checks)
	}
}
