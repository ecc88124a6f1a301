package devserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// isolateAWSEnv points the AWS SDK's and CLI's configuration away from
// the machine's, so only what a test sets is used.
func isolateAWSEnv(t *testing.T) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "",
		"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
	} {
		t.Setenv(k, v) // restored after the test
		if v == "" {
			os.Unsetenv(k)
		}
	}
}

// A producer's own EventBridge client works against dispatch serve with
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set to the tenant's ingress
// credentials and the endpoint changed, nothing else: its command is
// delivered. With another secret it is refused.
func TestProducerSDKWithIngressCredentials(t *testing.T) {
	isolateAWSEnv(t)
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	creds, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, DemoTenant), DemoTenant)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", s.Info().URL)
	cfg, err := awsconfig.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	client := eventbridge.NewFromConfig(cfg)
	id := "0f8fad5b-d9cb-469f-a165-000000000301"
	detail := string(signed(t, demoKeyFrom(t, dir), id, DemoTarget, DemoCommand, `{"sku":"A-1"}`))
	entry := types.PutEventsRequestEntry{Source: aws.String(DemoSource), DetailType: aws.String(envelope.EventType), Detail: aws.String(detail)}
	out, err := client.PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}})
	if err != nil {
		t.Fatalf("PutEvents with the demo's ingress credentials: %v", err)
	}
	if out.FailedEntryCount != 0 || aws.ToString(out.Entries[0].EventId) == "" {
		t.Fatalf("PutEvents = %+v", out.Entries)
	}
	waitFor(t, "the delivered event", func() bool {
		return strings.Contains(strings.Join(names(t, s, DemoTenant), ","), telemetry.NameDelivered)
	})

	cfg.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: strings.Repeat("x", 40)}, nil
	}))
	_, err = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 }).
		PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidSignatureException" {
		t.Fatalf("PutEvents with a wrong secret = %v, want InvalidSignatureException", err)
	}
}

// The AWS CLI (aws events put-events --endpoint-url) works with the
// tenant's ingress credentials and is refused without them. In CI
// (CI=true) a missing aws fails the test: .ci/run installs it.
func TestAWSCLIPutEvents(t *testing.T) {
	awsBin, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the AWS CLI (aws) is not on PATH; .ci/run installs Debian's awscli")
		}
		t.Skip("the AWS CLI (aws) is not on PATH; install awscli to run this test")
	}
	isolateAWSEnv(t)
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	entries := filepath.Join(t.TempDir(), "entries.json")
	if err := os.WriteFile(entries, []byte(`[{"Source":"demo/app","DetailType":"snavio.command-sent","Detail":"{}"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, extra ...string) (string, error) {
		args := append([]string{"events", "put-events", "--endpoint-url", s.Info().URL, "--region", "us-east-1", "--output", "json",
			"--entries", "file://" + entries}, extra...)
		cmd := exec.CommandContext(t.Context(), awsBin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := run([]string{"AWS_SHARED_CREDENTIALS_FILE=" + ingresscred.DefaultFile(dir, DemoTenant)})
	if err != nil {
		t.Fatalf("aws events put-events with the demo's credentials: %v\n%s", err, out)
	}
	var res struct {
		FailedEntryCount int
		Entries          []struct{ EventId string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.FailedEntryCount != 0 || len(res.Entries) != 1 || res.Entries[0].EventId == "" {
		t.Fatalf("aws events put-events answered %s (%v)", out, err)
	}
	out, err = run(nil, "--no-sign-request")
	if err == nil || !strings.Contains(out, "MissingAuthenticationTokenException") {
		t.Fatalf("unsigned aws events put-events: err %v, output %s; want MissingAuthenticationTokenException", err, out)
	}
	out, err = run([]string{"AWS_ACCESS_KEY_ID=SNVKAAAAAAAAAAAAAAAA", "AWS_SECRET_ACCESS_KEY=" + strings.Repeat("y", 40)})
	if err == nil || !strings.Contains(out, "UnrecognizedClientException") {
		t.Fatalf("aws events put-events with an unknown key: err %v, output %s; want UnrecognizedClientException", err, out)
	}
}
