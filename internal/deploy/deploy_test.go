package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/snavio/snavio/internal/deploy/cfnfake"
	"github.com/snavio/snavio/internal/deploy/lambdazip"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

const (
	deliveryKey  = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	snapshotSeed = "c25hcHNob3Qtc2lnbmluZy1rZXktc2VlZC0zMmJ5dGU="
)

// snapshotPublic is snapshotSeed's Ed25519 public key, in base64.
func snapshotPublic(t *testing.T) string {
	seed, err := base64.StdEncoding.DecodeString(snapshotSeed)
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("snapshotSeed: %d bytes, %v", len(seed), err)
	}
	return base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
}

type rig struct {
	fake *cfnfake.Fake
	s3   *s3.Client
	d    *Deployer
	evs  []Event
}

func newRig(t *testing.T) *rig {
	t.Helper()
	fake := cfnfake.New()
	cfnSrv := httptest.NewServer(fake)
	t.Cleanup(cfnSrv.Close)
	s3Srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(s3Srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(s3Srv.URL); o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Fatal(err)
	}
	r := &rig{fake: fake, s3: s3c}
	r.d = &Deployer{
		CFN:    cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(cfnSrv.URL) }),
		S3:     s3c,
		Region: "us-east-1",
		Clock:  clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)),
		// The waiters' real polling loop, with millisecond delays: the
		// fake moves one state per poll, so no test waits on a timer.
		WaitMin: time.Millisecond, WaitMax: 2 * time.Millisecond,
		Progress: func(e Event) { r.evs = append(r.evs, e) },
	}
	return r
}

func zipOf(t *testing.T, body string) []byte {
	var b bytes.Buffer
	if err := lambdazip.Write(&b, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func template(t *testing.T, env string) []byte {
	tpl, err := stack.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.Render(tpl, "json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func input(t *testing.T, zip string) Input {
	return Input{Env: "test", CodeBucket: "artifacts", Zip: zipOf(t, zip), Arch: "arm64", DeliveryKey: deliveryKey, SnapshotSeed: snapshotSeed, Template: template(t, "test")}
}

// lastCreate returns the form of the last CreateChangeSet request.
func lastCreate(t *testing.T, f *cfnfake.Fake) map[string]string {
	t.Helper()
	var form map[string]string
	for _, r := range f.Requests() {
		if r.Action == "CreateChangeSet" {
			form = map[string]string{}
			for k, v := range r.Form {
				form[k] = v[0]
			}
		}
	}
	if form == nil {
		t.Fatal("no CreateChangeSet request")
	}
	return form
}

func TestCreateThenNoChangeThenUpdate(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	// First deploy: CREATE.
	p, err := r.d.Plan(ctx, input(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Type != "CREATE" || p.NoChanges() || !p.Artifact.Uploaded {
		t.Fatalf("plan = %+v, want a CREATE with changes and an upload", p)
	}
	form := lastCreate(t, r.fake)
	for k, want := range map[string]string{
		"StackName": "snavio-test", "ChangeSetType": "CREATE", "Capabilities.member.1": "CAPABILITY_NAMED_IAM",
		"Parameters.member.1.ParameterKey": "CodeBucket", "Parameters.member.1.ParameterValue": "artifacts",
		"Parameters.member.2.ParameterKey": "CodeKey", "Parameters.member.2.ParameterValue": p.Artifact.Key,
		"Parameters.member.3.ParameterKey": "Architecture", "Parameters.member.3.ParameterValue": "arm64",
		"Parameters.member.4.ParameterKey": "DeliveryKey", "Parameters.member.4.ParameterValue": deliveryKey,
		"Parameters.member.5.ParameterKey": "SnapshotSigningKey", "Parameters.member.5.ParameterValue": snapshotSeed,
		"Parameters.member.6.ParameterKey": "SnapshotPublicKey", "Parameters.member.6.ParameterValue": snapshotPublic(t),
		"Parameters.member.7.ParameterKey": "DeliveryKeyFingerprint", "Parameters.member.7.ParameterValue": stack.DeliveryKeyFingerprint(deliveryKey),
		"ChangeSetName": "snavio-20261125T120000Z",
	} {
		if form[k] != want {
			t.Errorf("CreateChangeSet %s = %q, want %q", k, form[k], want)
		}
	}
	if !strings.HasPrefix(p.Artifact.Key, "snavio/lambda/") || !strings.HasSuffix(p.Artifact.Key, ".zip") || len(p.Artifact.SHA256) != 64 {
		t.Errorf("artifact key %q: want snavio/lambda/<sha256>.zip", p.Artifact.Key)
	}
	obj, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("artifacts"), Key: aws.String(p.Artifact.Key)})
	if err != nil {
		t.Fatalf("the zip is not in S3: %v", err)
	}
	obj.Body.Close()
	res, err := r.d.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "CREATE_COMPLETE" || res.Outputs["BusName"] == "" {
		t.Errorf("apply = %+v, want CREATE_COMPLETE with outputs", res)
	}
	if len(r.evs) < 10 || r.evs[len(r.evs)-1].Status != "CREATE_COMPLETE" {
		t.Errorf("progress saw %d events, last %+v; want every resource's and the stack's CREATE_COMPLETE last", len(r.evs), r.evs[len(r.evs)-1])
	}

	// Same zip, same template: no changes, the change set is deleted,
	// the zip is not uploaded again, the delivery and snapshot keys are kept.
	in := input(t, "v1")
	in.DeliveryKey, in.SnapshotSeed = "", ""
	r.d.Clock = clock.NewFake(time.Date(2026, 11, 25, 12, 5, 0, 0, time.UTC))
	p2, err := r.d.Plan(ctx, in)
	if err != nil {
		t.Fatalf("a change set without changes is not an error: %v", err)
	}
	if !p2.NoChanges() || p2.Type != "UPDATE" || p2.Artifact.Uploaded {
		t.Errorf("no-change plan = %+v", p2)
	}
	f := lastCreate(t, r.fake)
	for i, k := range []string{"DeliveryKey", "SnapshotSigningKey", "SnapshotPublicKey", "DeliveryKeyFingerprint"} {
		n := fmt.Sprintf("Parameters.member.%d.", i+4)
		if f[n+"ParameterKey"] != k || f[n+"UsePreviousValue"] != "true" || f[n+"ParameterValue"] != "" || f["ChangeSetType"] != "UPDATE" {
			t.Errorf("no-change CreateChangeSet: %v; want UPDATE with %s's previous value", f, k)
		}
	}
	if acts := r.fake.Actions(); acts[len(acts)-1] != "DeleteChangeSet" {
		t.Errorf("the empty change set was not deleted: %v", acts)
	}

	// A new zip: the functions change (their CodeKey), nothing replaced.
	r.d.Clock = clock.NewFake(time.Date(2026, 11, 25, 12, 10, 0, 0, time.UTC))
	in = input(t, "v2")
	in.DeliveryKey, in.SnapshotSeed = "", ""
	p3, err := r.d.Plan(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var fns []string
	for _, c := range p3.Changes {
		if c.Action != "Modify" || c.Replaced() {
			t.Errorf("change %+v: want an in-place modify", c)
		}
		fns = append(fns, c.LogicalID)
	}
	if len(fns) != len(stack.Functions) || !slices.Contains(fns, "IngestFunction") {
		t.Errorf("changed %v, want the %d functions", fns, len(stack.Functions))
	}
	res, err = r.d.Apply(ctx, p3)
	if err != nil || res.Status != "UPDATE_COMPLETE" {
		t.Fatalf("apply update = %+v, %v", res, err)
	}
}

func TestRenamedEnvResourceIsReplaced(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	first := input(t, "v1")
	first.RoleARN = "arn:aws:iam::123456789012:role/snavio-deployer"
	p, err := r.d.Plan(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := lastCreate(t, r.fake)["RoleARN"]; got != first.RoleARN {
		t.Errorf("CreateChangeSet RoleARN = %q, want the service role", got)
	}
	if _, err := r.d.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The same stack with another env's template renames everything.
	in := input(t, "v1")
	in.Template = bytes.ReplaceAll(in.Template, []byte("snavio-test-flow"), []byte("snavio-test-flow2"))
	p, err = r.d.Plan(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || !p.Changes[0].Replaced() || p.Changes[0].LogicalID != "FlowTable" {
		t.Errorf("changes %+v, want FlowTable replaced", p.Changes)
	}
}

func TestFailedChangeSet(t *testing.T) {
	r := newRig(t)
	r.fake.FailChangeSets("Template error: resource IngestRole refers to an unknown role")
	_, err := r.d.Plan(context.Background(), input(t, "v1"))
	var cf *ChangeSetFailedError
	if !errors.As(err, &cf) || !strings.Contains(err.Error(), "unknown role") {
		t.Fatalf("Plan = %v, want a ChangeSetFailedError with CloudFormation's reason", err)
	}
	acts := r.fake.Actions()
	if !slices.Contains(acts, "DeleteChangeSet") || acts[len(acts)-1] != "DeleteStack" {
		t.Errorf("calls %v: want the failed change set and the empty stack deleted", acts)
	}
	if slices.Contains(acts, "ExecuteChangeSet") {
		t.Error("a failed change set was executed")
	}
	if st := r.fake.Status("snavio-test"); st != "DELETE_COMPLETE" {
		t.Errorf("stack left as %q, want the empty stack deleted", st)
	}
}

func TestUpdateRollsBack(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, err := r.d.Plan(ctx, input(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	r.fake.FailResource("SlowFunction")
	in := input(t, "v2")
	in.DeliveryKey, in.SnapshotSeed = "", ""
	p, err = r.d.Plan(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	r.evs = nil
	_, err = r.d.Apply(ctx, p)
	var sf *StackFailedError
	if !errors.As(err, &sf) || sf.Status != "UPDATE_ROLLBACK_COMPLETE" {
		t.Fatalf("Apply = %v, want a StackFailedError in UPDATE_ROLLBACK_COMPLETE", err)
	}
	if len(sf.Failures) != 1 || sf.Failures[0].LogicalID != "SlowFunction" || !strings.Contains(err.Error(), "fake failure of SlowFunction") || !strings.Contains(err.Error(), "rolled the stack back") {
		t.Errorf("error %q, failures %+v: want SlowFunction's reason and the rollback", err, sf.Failures)
	}
	if len(r.evs) == 0 || r.evs[0].Status != "UPDATE_IN_PROGRESS" {
		t.Errorf("progress %+v: want only this update's events, from its start", r.evs)
	}
}

func TestCreateRollsBackThenNeedsDestroy(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.fake.FailResource("FlowTable")
	p, err := r.d.Plan(ctx, input(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.d.Apply(ctx, p)
	var sf *StackFailedError
	if !errors.As(err, &sf) || sf.Status != "ROLLBACK_COMPLETE" {
		t.Fatalf("Apply = %v, want ROLLBACK_COMPLETE", err)
	}
	_, err = r.d.Plan(ctx, input(t, "v1"))
	if err == nil || !strings.Contains(err.Error(), "snavio dispatch destroy --env test") {
		t.Fatalf("Plan after a failed create = %v, want the destroy hint", err)
	}
	r.fake.FailResource("")
	if ok, err := r.d.Destroy(ctx, "test"); err != nil || !ok {
		t.Fatalf("Destroy = %v, %v", ok, err)
	}
	if _, err := r.d.Plan(ctx, input(t, "v1")); err != nil {
		t.Fatalf("Plan after destroy: %v", err)
	}
}

func TestDestroy(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if ok, err := r.d.Destroy(ctx, "test"); err != nil || ok {
		t.Fatalf("Destroy of no stack = %v, %v; want false, nil", ok, err)
	}
	p, err := r.d.Plan(ctx, input(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	r.evs = nil
	if ok, err := r.d.Destroy(ctx, "test"); err != nil || !ok {
		t.Fatalf("Destroy = %v, %v", ok, err)
	}
	var skipped []string
	for _, e := range r.evs {
		if e.Status == "DELETE_SKIPPED" {
			skipped = append(skipped, e.LogicalID)
		}
	}
	slices.Sort(skipped)
	if want := []string{"ChangelogTable", "FlowTable", "OutboxTable", "RegistryTable", "SnapshotBucket"}; !slices.Equal(skipped, want) {
		t.Errorf("retained %v, want %v", skipped, want)
	}
	if st := r.fake.Status("snavio-test"); st != "DELETE_COMPLETE" {
		t.Errorf("stack is %q", st)
	}
}

func TestFirstDeployNeedsDeliveryKey(t *testing.T) {
	r := newRig(t)
	in := input(t, "v1")
	in.DeliveryKey = ""
	if _, err := r.d.Plan(context.Background(), in); err == nil || !strings.Contains(err.Error(), "--delivery-key-file") {
		t.Fatalf("Plan = %v, want the delivery key asked for", err)
	}
	if acts := r.fake.Actions(); slices.Contains(acts, "CreateChangeSet") {
		t.Errorf("calls %v: nothing may be created", acts)
	}
}

func TestLargeTemplateGoesThroughS3(t *testing.T) {
	r := newRig(t)
	r.d.TemplateBodyLimit = 100
	_, err := r.d.Plan(context.Background(), input(t, "v1"))
	// The fake takes bodies only: it refuses the URL, naming it.
	if err == nil || !strings.Contains(err.Error(), "https://artifacts.s3.us-east-1.amazonaws.com/snavio/templates/") {
		t.Fatalf("Plan = %v, want the template's S3 URL passed", err)
	}
	out, err := r.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("artifacts"), Prefix: aws.String("snavio/templates/")})
	if err != nil || len(out.Contents) != 1 {
		t.Fatalf("templates in S3: %v, %v", out, err)
	}
}

func TestFirstDeployNeedsSnapshotKey(t *testing.T) {
	r := newRig(t)
	in := input(t, "v1")
	in.SnapshotSeed = ""
	if _, err := r.d.Plan(context.Background(), in); err == nil || !strings.Contains(err.Error(), "first deploy needs the snapshot signing key (--snapshot-key-file)") {
		t.Fatalf("Plan = %v, want the snapshot key asked for", err)
	}
	in.SnapshotSeed = "c2hvcnQ="
	if _, err := r.d.Plan(context.Background(), in); err == nil || !strings.Contains(err.Error(), "not base64 of a 32-byte Ed25519 seed") {
		t.Fatalf("Plan = %v, want the bad seed refused", err)
	}
	if acts := r.fake.Actions(); slices.Contains(acts, "CreateChangeSet") {
		t.Errorf("calls %v: nothing may be created", acts)
	}
}

// TestStackWithoutSnapshotKey: a stack deployed before the snapshot key
// parameters existed has no previous value to keep, so its next deploy
// asks for the key instead of failing in CloudFormation.
func TestStackWithoutSnapshotKey(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	var old map[string]any
	if err := json.Unmarshal(template(t, "test"), &old); err != nil {
		t.Fatal(err)
	}
	delete(old["Parameters"].(map[string]any), stack.ParamSnapshotSigningKey)
	delete(old["Parameters"].(map[string]any), stack.ParamSnapshotPublicKey)
	delete(old["Parameters"].(map[string]any), stack.ParamDeliveryKeyFingerprint)
	body, _ := json.Marshal(old)
	out, err := r.d.CFN.CreateChangeSet(ctx, &cloudformation.CreateChangeSetInput{
		StackName: aws.String("snavio-test"), ChangeSetName: aws.String("old"), ChangeSetType: cftypes.ChangeSetTypeCreate,
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityNamedIam}, TemplateBody: aws.String(string(body)),
		Parameters: []cftypes.Parameter{
			{ParameterKey: aws.String(stack.ParamCodeBucket), ParameterValue: aws.String("artifacts")},
			{ParameterKey: aws.String(stack.ParamCodeKey), ParameterValue: aws.String("snavio/lambda/old.zip")},
			{ParameterKey: aws.String(stack.ParamDeliveryKey), ParameterValue: aws.String(deliveryKey)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudformation.NewChangeSetCreateCompleteWaiter(r.d.CFN, func(o *cloudformation.ChangeSetCreateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 2*time.Millisecond
	}).Wait(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String("snavio-test"), ChangeSetName: out.Id}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Apply(ctx, &Plan{Stack: "snavio-test", Type: "CREATE", ChangeSet: "old", ChangeSetID: aws.ToString(out.Id)}); err != nil {
		t.Fatal(err)
	}

	in := input(t, "v1")
	in.DeliveryKey, in.SnapshotSeed = "", ""
	if _, err := r.d.Plan(ctx, in); err == nil || !strings.Contains(err.Error(), "was deployed without a snapshot signing key: this deploy needs the snapshot signing key (--snapshot-key-file)") {
		t.Fatalf("Plan = %v, want the snapshot key asked for", err)
	}
	in.SnapshotSeed = snapshotSeed
	p, err := r.d.Plan(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if f := lastCreate(t, r.fake); f["Parameters.member.4.UsePreviousValue"] != "true" || f["Parameters.member.5.ParameterValue"] != snapshotSeed ||
		f["Parameters.member.7.ParameterKey"] != "" {
		t.Errorf("CreateChangeSet %v: want the delivery key kept, the snapshot key given, and no fingerprint (the old stack has none to keep: the default applies)", f)
	}
	if res, err := r.d.Apply(ctx, p); err != nil || res.Status != "UPDATE_COMPLETE" {
		t.Fatalf("Apply = %+v, %v", res, err)
	}
}

// TestFakeChecksParameters: the fake refuses parameters as CloudFormation
// does, so the tests above would see a deploy that gives too few or bad
// ones.
func TestFakeChecksParameters(t *testing.T) {
	r := newRig(t)
	in := input(t, "v1")
	in.DeliveryKey = "c2hvcnQ="
	if _, err := r.d.Plan(context.Background(), in); err == nil || !strings.Contains(err.Error(), "Parameter 'DeliveryKey' must match pattern") {
		t.Fatalf("Plan = %v, want the short delivery key refused by its AllowedPattern", err)
	}
	in = input(t, "v1")
	var tpl map[string]any
	if err := json.Unmarshal(in.Template, &tpl); err != nil {
		t.Fatal(err)
	}
	tpl["Parameters"].(map[string]any)["Extra"] = map[string]any{"Type": "String"}
	in.Template, _ = json.Marshal(tpl)
	if _, err := r.d.Plan(context.Background(), in); err == nil || !strings.Contains(err.Error(), "Parameters: [Extra] must have values") {
		t.Fatalf("Plan = %v, want the parameter without a value refused", err)
	}
}
