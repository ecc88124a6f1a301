package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/snavio/snavio/internal/lambda"
	"github.com/snavio/snavio/internal/store/awsstore"
)

// TestNamesAgreeWithTheStoreAndTheLambda: the stack names tables, topics
// and environment variables as the code that uses them does. The stack
// does not import those packages (they would link the AWS store into the
// CLI), so this test holds the two definitions together.
func TestNamesAgreeWithTheStoreAndTheLambda(t *testing.T) {
	c := awsstore.Config{Env: "prod"}
	c.SetDefaults()
	n := Names{Env: "prod"}
	for _, p := range [][2]string{
		{n.Table(TableFlow), c.FlowTable()},
		{n.Table(TableRegistry), c.RegistryTable()},
		{n.Table(TableChangelog), c.ChangelogTable()},
		{n.Table(TableOutbox), c.OutboxTable()},
		{n.TelemetryTopicPrefix(), c.TopicPrefix()},
		{envFunction, lambda.EnvFunction},
		{envEnv, lambda.EnvEnv},
		{envEscalationQueue, lambda.EnvEscalationQueue},
		{envDeliveryKey, lambda.EnvDeliveryKey},
		{envMaxReceives, lambda.EnvMaxReceives},
		{envSnapshotBucket, lambda.EnvSnapshotBucket},
		{envSnapshotKeys, lambda.EnvSnapshotKeys},
		{envSnapshotSigning, lambda.EnvSnapshotSigningKey},
		{envSnapshotKeyID, lambda.EnvSnapshotKeyID},
		{envAccountID, lambda.EnvAccountID},
		{FnIngest, lambda.FunctionIngest},
		{FnSlow, lambda.FunctionSlow},
		{FnOutbox, lambda.FunctionOutbox},
		{FnSnapshot, lambda.FunctionSnapshot},
		{FnMonitor, lambda.FunctionMonitor},
		{FnAuditor, lambda.FunctionAuditor},
		{FnControl, lambda.FunctionControl},
	} {
		if p[0] != p[1] {
			t.Errorf("stack says %q, the code that reads it %q", p[0], p[1])
		}
	}
	if slowMaxReceives != lambda.DefaultMaxReceives {
		t.Errorf("slowMaxReceives %d, lambda.DefaultMaxReceives %d", slowMaxReceives, lambda.DefaultMaxReceives)
	}
}

// envAccepted reports whether the AWS store accepts env.
func envAccepted(env string) bool {
	c := awsstore.Config{Env: env, AWSConfig: aws.Config{Region: "us-east-1"}}
	c.SetDefaults()
	err := c.Validate()
	return err == nil || !strings.Contains(err.Error(), "env ")
}

// FuzzCheckEnv: CheckEnv accepts exactly the environments the AWS store
// accepts, and every accepted one makes valid names.
func FuzzCheckEnv(f *testing.F) {
	for _, s := range []string{"prod", "a", "-a", "A", "a-b-1", strings.Repeat("z", 32), strings.Repeat("z", 33), "é", "a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		ours := CheckEnv(env) == nil
		if ours != envAccepted(env) {
			t.Fatalf("env %q: CheckEnv says %v, the AWS store %v", env, ours, !ours)
		}
		if ours && len(Names{Env: env}.Function(FnSnapshot)) > 64 {
			t.Fatalf("env %q makes a function name over 64 characters", env)
		}
	})
}

// bootstrapKnows reports whether cmd/snavio-lambda has key's handler: a
// stage (lambda.Handler), a job (lambda.JobHandler) or the control API
// (lambda.ControlHandler).
func bootstrapKnows(key string) bool {
	return lambda.IsJob(key) || key == lambda.FunctionIngest || key == lambda.FunctionSlow || key == lambda.FunctionControl
}

// TestOnlyBuiltFunctionsAreTriggered: a function is built exactly when
// the bootstrap runs it, and a function the bootstrap cannot run keeps
// its schedule and stream disabled; the others' triggers are enabled.
func TestOnlyBuiltFunctionsAreTriggered(t *testing.T) {
	if len(specs()) != len(Functions) {
		t.Fatalf("%d specs, %d Functions", len(specs()), len(Functions))
	}
	for i, s := range specs() {
		if s.key != Functions[i] {
			t.Errorf("spec %d is %s, Functions says %s", i, s.key, Functions[i])
		}
		if want := bootstrapKnows(s.key); s.built != want {
			t.Errorf("%s: built %v, but the bootstrap runs it: %v", s.key, s.built, want)
		}
	}
	var doc struct {
		Resources map[string]struct {
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(render(t, "test", "json"), &doc); err != nil {
		t.Fatal(err)
	}
	triggers := 0
	for _, s := range specs() {
		if s.schedule != "" {
			triggers++
			if got, want := doc.Resources[s.id+"Schedule"].Properties["State"], state(s.built); got != want {
				t.Errorf("%sSchedule is %v, want %s", s.id, got, want)
			}
		}
	}
	if got := doc.Resources["OutboxStream"].Properties["Enabled"]; got != spec(FnOutbox).built {
		t.Errorf("OutboxStream Enabled %v, want %v", got, spec(FnOutbox).built)
	}
	if triggers != 3 {
		t.Errorf("%d scheduled functions, want the snapshot, monitor and auditor", triggers)
	}
}

// FuzzTelemetryTopic: the stack names a tenant's topic as the AWS store's
// publisher does.
func FuzzTelemetryTopic(f *testing.F) {
	for _, s := range []string{"acme", "acme.web_1", "a_d", "a.", "", "bad/x", "_platform"} {
		f.Add(s)
	}
	pub, err := awsstore.NewSNSPublisher(awsstore.Config{Env: "prod", AccountID: "123456789012", AWSConfig: aws.Config{Region: "us-east-1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tenant string) {
		ours, err1 := Names{Env: "prod"}.TelemetryTopic(tenant)
		arn, err2 := pub.TopicARN(tenant)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("tenant %q: stack %v, store %v", tenant, err1, err2)
		}
		if err1 == nil && arn != "arn:aws:sns:us-east-1:123456789012:"+ours {
			t.Fatalf("tenant %q: stack %q, store %q", tenant, ours, arn)
		}
	})
}
