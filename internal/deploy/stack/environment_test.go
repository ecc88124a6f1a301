package stack_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/snavio/snavio/internal/deploy"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/lambda"
)

// renderedFunctions renders env's template and returns each function's
// environment by its SNAVIO_FUNCTION, and the parameters' declarations.
func renderedFunctions(t *testing.T, env string) (map[string]map[string]any, map[string]map[string]any) {
	t.Helper()
	tpl, err := stack.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.Render(tpl, "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]map[string]any
		Resources  map[string]struct {
			Type       string
			Properties struct {
				Environment struct{ Variables map[string]any }
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	fns := map[string]map[string]any{}
	for id, r := range doc.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		vars := r.Properties.Environment.Variables
		key, _ := vars[lambda.EnvFunction].(string)
		if key == "" || fns[key] != nil {
			t.Fatalf("%s: SNAVIO_FUNCTION %q is missing or not unique", id, key)
		}
		fns[key] = vars
	}
	return fns, doc.Parameters
}

// deployValues are plausible values of the stack's parameters and pseudo
// parameters as a deploy gives them: the snapshot public key derived by
// deploy.ParseSnapshotSeed, as snavio dispatch deploy derives it.
func deployValues(t *testing.T, params map[string]map[string]any) map[string]string {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i * 7)
	}
	snap, err := deploy.ParseSnapshotSeed(base64.StdEncoding.EncodeToString(seed) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]string{
		"AWS::AccountId":                  "123456789012",
		"AWS::Region":                     "us-east-1",
		"AWS::Partition":                  "aws",
		stack.ParamCodeBucket:             "artifacts",
		stack.ParamCodeKey:                "snavio/lambda/0.zip",
		stack.ParamArchitecture:           "arm64",
		stack.ParamDeliveryKey:            base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))),
		stack.ParamSnapshotSigningKey:     snap.Seed,
		stack.ParamSnapshotPublicKey:      snap.Public,
		stack.ParamDeliveryKeyFingerprint: "none",
		"EscalationQueue":                 "https://sqs.us-east-1.amazonaws.com/123456789012/snavio-test-escalation",
		"SnapshotBucket":                  "snavio-test-snap-123456789012",
		"SnapshotBucket.Arn":              "arn:aws:s3:::snavio-test-snap-123456789012",
		"EscalationQueue.Arn":             "arn:aws:sqs:us-east-1:123456789012:snavio-test-escalation",
		"OutboxTable.StreamArn":           "arn:aws:dynamodb:us-east-1:123456789012:table/snavio-test-outbox/stream/x",
		"ControlFunctionUrl.FunctionUrl":  "https://x.lambda-url.us-east-1.on.aws/",
	}
	for name, p := range params {
		if _, ok := v[name]; !ok {
			t.Fatalf("parameter %s has no value in this test: add one", name)
		}
		if pat, ok := p["AllowedPattern"].(string); ok && !regexp.MustCompile(pat).MatchString(v[name]) {
			t.Errorf("parameter %s: the value a deploy gives, %q, fails its AllowedPattern %s", name, v[name], pat)
		}
	}
	return v
}

// resolve turns a rendered variable into the string Lambda would see.
func resolve(t *testing.T, name string, v any, values map[string]string) string {
	t.Helper()
	lookup := func(ref string) string {
		s, ok := values[ref]
		if !ok {
			t.Fatalf("%s refers to %q, which this test cannot resolve", name, ref)
		}
		return s
	}
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok {
			return lookup(ref)
		}
		if sub, ok := x["Fn::Sub"].(string); ok {
			return regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(sub, func(m string) string { return lookup(m[2 : len(m)-1]) })
		}
	}
	t.Fatalf("%s = %v: an intrinsic this test does not resolve", name, v)
	return ""
}

// TestEnvironmentsAreAccepted feeds every function's rendered environment
// (references replaced by what a deploy makes of them) to the bootstrap's
// own configuration parser, so the stack and cmd/snavio-lambda cannot
// drift: every function the bootstrap runs starts, reads every variable
// the stack gives it, and the dispatcher functions trust the key the
// snapshot function signs with. A function the bootstrap does not run
// must be refused by both parsers (the stack marks it unbuilt).
func TestEnvironmentsAreAccepted(t *testing.T) {
	fns, params := renderedFunctions(t, "test")
	values := deployValues(t, params)
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	if len(fns) != len(stack.Functions) {
		t.Errorf("%d functions in the template, stack.Functions has %d", len(fns), len(stack.Functions))
	}
	var stages []lambda.Config
	var snapshotJob *lambda.JobConfig
	var control *lambda.ControlConfig
	for _, key := range stack.Functions {
		vars := fns[key]
		if vars == nil {
			t.Errorf("%s: no function in the template", key)
			continue
		}
		env := map[string]string{}
		for name, v := range vars {
			env[name] = resolve(t, key+"."+name, v, values)
		}
		read := map[string]bool{}
		getenv := func(name string) string { read[name] = true; return env[name] }
		var err error
		switch {
		case lambda.IsJob(key):
			var c lambda.JobConfig
			c, err = lambda.JobConfigFromEnv(getenv, awsCfg)
			if key == lambda.FunctionSnapshot {
				snapshotJob = &c
			}
		case key == lambda.FunctionIngest || key == lambda.FunctionSlow:
			var c lambda.Config
			c, err = lambda.FromEnv(getenv, awsCfg)
			stages = append(stages, c)
		case key == lambda.FunctionControl:
			var c lambda.ControlConfig
			c, err = lambda.ControlConfigFromEnv(getenv, awsCfg)
			control = &c
		default:
			_, errStage := lambda.FromEnv(getenv, awsCfg)
			_, errJob := lambda.JobConfigFromEnv(getenv, awsCfg)
			if errStage == nil || errJob == nil || !strings.Contains(errStage.Error(), key) {
				t.Errorf("%s: the bootstrap accepts it (%v, %v); the stack deploys it unbuilt", key, errStage, errJob)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: the bootstrap refuses the stack's environment: %v", key, err)
			continue
		}
		for name := range env {
			if !read[name] {
				t.Errorf("%s: the stack sets %s, which its configuration does not read", key, name)
			}
		}
	}
	if snapshotJob == nil || len(stages) != 2 {
		t.Fatalf("parsed %d stages and snapshot job %v; want ingest, slow and the snapshot job", len(stages), snapshotJob)
	}
	pub := snapshotJob.SnapshotKey.Public().(ed25519.PublicKey)
	// The control function generates snapshots on request: the same
	// bucket, key and key id as the snapshot function, and callers of the
	// stack's own account.
	if control == nil || control.Store.SnapshotBucket != snapshotJob.Store.SnapshotBucket || control.SnapshotKeyID != snapshotJob.SnapshotKeyID ||
		!control.SnapshotKey.Equal(snapshotJob.SnapshotKey) || control.Store.AccountID != values["AWS::AccountId"] {
		t.Errorf("the control function's snapshot settings or account differ from the snapshot function's and the stack's: %+v", control)
	}
	for _, c := range stages {
		if c.Store.SnapshotBucket != snapshotJob.Store.SnapshotBucket {
			t.Errorf("%s cold-starts from bucket %q, the snapshot function writes %q", c.Function, c.Store.SnapshotBucket, snapshotJob.Store.SnapshotBucket)
		}
		trusted := c.SnapshotKeys[snapshotJob.SnapshotKeyID]
		if !pub.Equal(trusted) {
			t.Errorf("%s trusts %v under %q; the snapshot function signs with %x", c.Function, c.SnapshotKeys, snapshotJob.SnapshotKeyID, pub)
		}
	}
}

// The control function test-routes a target queue against the roles of the
// functions that send to it and monitor it: those ARNs must be the roles
// the stack creates for them.
func TestControlChecksQueuesAgainstTheStacksRoles(t *testing.T) {
	tpl, err := stack.Build("test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.Render(tpl, "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties struct{ RoleName, Path string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	roles := map[string]bool{}
	for _, r := range doc.Resources {
		if r.Type == "AWS::IAM::Role" {
			roles["arn:aws:iam::123456789012:role"+r.Properties.Path+r.Properties.RoleName] = true
		}
	}
	got := lambda.DispatcherRoles(stack.Names{Env: "test"}, "us-east-1", "123456789012")
	for _, arn := range append(got.Senders, got.Monitor) {
		if !roles[arn] {
			t.Errorf("%s is not a role of the stack (roles: %v)", arn, roles)
		}
	}
	if len(got.Senders) != 2 {
		t.Errorf("senders %v: want the ingest and slow functions' roles", got.Senders)
	}
}
